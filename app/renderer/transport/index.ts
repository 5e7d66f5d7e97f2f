import { httpTransport } from "./http-transport.js";
import { ipcTransport } from "./ipc-transport.js";
import { createClient, type Client } from "./transport.js";

/** Electron when the preload is there, web mode otherwise. */
export const client: Client = createClient(window.guild ? ipcTransport(window.guild) : httpTransport());
export type { Client };
