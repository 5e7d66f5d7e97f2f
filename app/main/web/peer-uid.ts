// Which local user opened a TCP connection to us (Linux). The kernel lists
// every TCP socket in /proc/net/tcp and /proc/net/tcp6 with the uid that owns
// it; the client's end of a loopback connection is the row whose local
// address is the client's and whose remote address is ours. Web mode uses it
// to refuse other users of a shared machine, on top of the session secret.
import { readFile } from "node:fs/promises";
import { isIPv4, isIPv6, type Socket } from "node:net";
import { endianness } from "node:os";

export interface Endpoint {
  address: string;
  port: number;
}

interface SocketRow {
  local: { address: Buffer; port: number };
  remote: { address: Buffer; port: number };
  uid: number;
}

/** An address as 16 bytes (IPv4 as ::ffff:a.b.c.d), so IPv4 and IPv4-mapped IPv6 compare equal; null if it is not an IP. */
export function addressBytes(address: string): Buffer | null {
  const a = address.replace(/%.*$/, "");
  if (isIPv4(a)) return Buffer.from([0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, ...a.split(".").map(Number)]);
  if (!isIPv6(a)) return null;
  // An embedded IPv4 tail (::ffff:127.0.0.1) becomes two hex groups.
  const v4 = /(\d+)\.(\d+)\.(\d+)\.(\d+)$/.exec(a);
  const hex = v4
    ? a.slice(0, v4.index) + [[v4[1], v4[2]], [v4[3], v4[4]]].map(([hi, lo]) => ((Number(hi) << 8) | Number(lo)).toString(16)).join(":")
    : a;
  const [head, tail] = hex.includes("::") ? hex.split("::") as [string, string] : [hex, undefined];
  const groups = (s: string) => (s === "" ? [] : s.split(":").map((g) => parseInt(g, 16)));
  const h = groups(head);
  const t = tail === undefined ? [] : groups(tail);
  const all = tail === undefined ? h : [...h, ...new Array<number>(8 - h.length - t.length).fill(0), ...t];
  if (all.length !== 8) return null;
  const out = Buffer.alloc(16);
  all.forEach((g, i) => out.writeUInt16BE(g, i * 2));
  return out;
}

/**
 * The kernel prints each address as the 32-bit words of its network-order
 * bytes read in host order (%08X), and the port as a plain number (%04X).
 */
function procAddress(hex: string, littleEndian: boolean): Buffer | null {
  if (hex.length !== 8 && hex.length !== 32) return null;
  const raw = Buffer.alloc(hex.length / 2);
  for (let w = 0; w < hex.length / 8; w++) {
    const n = parseInt(hex.slice(w * 8, w * 8 + 8), 16);
    if (littleEndian) raw.writeUInt32LE(n, w * 4);
    else raw.writeUInt32BE(n, w * 4);
  }
  if (raw.length === 16) return raw;
  return Buffer.concat([Buffer.from([0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff]), raw]);
}

/** The rows of /proc/net/tcp or /proc/net/tcp6 (the header and anything malformed are skipped). */
export function parseProcNetTcp(text: string, littleEndian = endianness() === "LE"): SocketRow[] {
  const rows: SocketRow[] = [];
  for (const line of text.split("\n")) {
    // sl local_address rem_address st tx_queue:rx_queue tr:tm->when retrnsmt uid timeout inode …
    const f = line.trim().split(/\s+/);
    if (f.length < 8 || !/^\d+:$/.test(f[0]!)) continue;
    const [la, lp] = f[1]!.split(":");
    const [ra, rp] = f[2]!.split(":");
    const local = la === undefined ? null : procAddress(la, littleEndian);
    const remote = ra === undefined ? null : procAddress(ra, littleEndian);
    const uid = Number(f[7]);
    if (!local || !remote || lp === undefined || rp === undefined || !Number.isInteger(uid)) continue;
    rows.push({ local: { address: local, port: parseInt(lp, 16) }, remote: { address: remote, port: parseInt(rp, 16) }, uid });
  }
  return rows;
}

/** The uid owning the client's end of the connection client → server, or null when no table lists it. */
export function socketOwner(tables: readonly string[], client: Endpoint, server: Endpoint, littleEndian?: boolean): number | null {
  const c = addressBytes(client.address);
  const s = addressBytes(server.address);
  if (!c || !s) return null;
  for (const table of tables)
    for (const row of parseProcNetTcp(table, littleEndian))
      if (row.local.port === client.port && row.remote.port === server.port && row.local.address.equals(c) && row.remote.address.equals(s))
        return row.uid;
  return null;
}

async function readTable(file: string): Promise<string> {
  try {
    return await readFile(file, "utf8");
  } catch {
    return ""; // no IPv6, or no /proc: nothing listed there
  }
}

const owners = new WeakMap<Socket, Promise<number | null>>();

/**
 * The uid of the process at the other end of `socket`, or null when it cannot
 * be told (not Linux, or the connection is not in this network namespace's
 * tables). Looked up once per connection.
 */
export function peerUid(socket: Socket): Promise<number | null> {
  let owner = owners.get(socket);
  if (owner) return owner;
  owner = (async () => {
    if (process.platform !== "linux") return null;
    const { remoteAddress, remotePort, localAddress, localPort } = socket;
    if (!remoteAddress || !remotePort || !localAddress || !localPort) return null;
    const tables = await Promise.all([readTable("/proc/net/tcp"), readTable("/proc/net/tcp6")]);
    return socketOwner(tables, { address: remoteAddress, port: remotePort }, { address: localAddress, port: localPort });
  })();
  owners.set(socket, owner);
  return owner;
}
