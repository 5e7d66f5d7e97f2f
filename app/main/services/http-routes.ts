// The seam between the HTTP server (ApiServer, app/main/services/api-server.ts)
// and the features that add routes to it (the OpenAI-compatible API, the
// renderer's web mode). A handler returns true when it answered the request.
import type { IncomingMessage, ServerResponse } from "node:http";
import type { Duplex } from "node:stream";

export type RouteHandler = (req: IncomingMessage, res: ServerResponse, url: URL) => Promise<boolean> | boolean;

/** Handles an HTTP upgrade (WebSocket); returns true when it took the socket. */
export type UpgradeHandler = (req: IncomingMessage, socket: Duplex, head: Buffer, url: URL) => boolean;

export interface RouteModule {
  routes: RouteHandler;
  upgrade?: UpgradeHandler;
  /**
   * True for the paths this module authenticates itself (web mode and its
   * session): ApiServer's API key does not apply to them. The Host and Origin
   * checks still do.
   */
  authenticates?: (url: URL) => boolean;
}
