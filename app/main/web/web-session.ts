// The web mode's per-launch secret, as Jupyter does it: a random token made
// when the server starts and printed in the app's URL (/app/?token=…). The
// first visit trades it for a cookie (HttpOnly, SameSite=Strict, Path=/app)
// and the token leaves the address bar; /app/rpc and /app/events then need
// that cookie, or the token in an `x-guild-token` header (scripts, tests).
// A restart makes a new token, so old tabs and links stop working.
import { createHash, randomBytes, timingSafeEqual } from "node:crypto";
import type { IncomingMessage } from "node:http";

/** The header scripts may send instead of the cookie. */
export const tokenHeader = "x-guild-token";
/** The query parameter of the printed URL. */
export const tokenParam = "token";

const digest = (s: string) => createHash("sha256").update(s, "utf8").digest();

export class WebSession {
  /** 32 random bytes, base64url: what the printed URL carries. */
  readonly token: string;
  private readonly tokenDigest: Buffer;

  constructor(token: string = randomBytes(32).toString("base64url")) {
    if (!/^[A-Za-z0-9_-]{32,}$/.test(token)) throw new Error("a web session token must be at least 32 base64url characters");
    this.token = token;
    this.tokenDigest = digest(token);
  }

  /** Compares in constant time (over digests, so the lengths need not match). */
  matches(candidate: string): boolean {
    return timingSafeEqual(this.tokenDigest, digest(candidate));
  }

  /**
   * The cookie's name. Browsers share cookies between the ports of one host,
   * so two servers (say `npm start` and `guild serve`) must not use the same name.
   */
  cookieName(port: number): string {
    return `guild_session_${port}`;
  }

  /** The Set-Cookie value a valid token is exchanged for: a session cookie (no Max-Age), scripts cannot read it. */
  setCookie(port: number): string {
    return `${this.cookieName(port)}=${this.token}; Path=/app; HttpOnly; SameSite=Strict`;
  }

  /** Whether the request carries the session (the cookie for this port, or the header), a wrong one, or none. */
  check(req: IncomingMessage): "ok" | "invalid" | "missing" {
    const header = req.headers[tokenHeader];
    if (typeof header === "string" && header !== "") return this.matches(header) ? "ok" : "invalid";
    const values = cookieValues(req.headers.cookie ?? "", this.cookieName(req.socket.localPort ?? 0));
    if (values.length === 0) return "missing";
    let ok = false;
    for (const value of values) ok = this.matches(value) || ok;
    return ok ? "ok" : "invalid";
  }

  /** The address to open: the server's base URL plus the app path and the token. */
  appUrl(serverUrl: string): string {
    return `${serverUrl.replace(/\/+$/, "")}/app/?${tokenParam}=${this.token}`;
  }
}

/** Every value of cookie `name` in a Cookie header (a browser may send several, from different paths). */
export function cookieValues(header: string, name: string): string[] {
  const values: string[] = [];
  for (const part of header.split(";")) {
    const eq = part.indexOf("=");
    if (eq < 0 || part.slice(0, eq).trim() !== name) continue;
    values.push(part.slice(eq + 1).trim().replace(/^"(.*)"$/, "$1"));
  }
  return values;
}
