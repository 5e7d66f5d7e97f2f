// The owner of a loopback connection's client end, from /proc/net/tcp{,6}:
// the tables' byte order, IPv4 and IPv6 rows, and a live lookup.
import { createServer, connect, type Socket } from "node:net";

import { describe, expect, it } from "vitest";

import { addressBytes, parseProcNetTcp, peerUid, socketOwner } from "./peer-uid.js";

const header = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode";
// A listening socket, then both ends of 127.0.0.1:43309 <- 127.0.0.1:50000 (as x86 prints them).
const ipv4 = [
  header,
  "   0: 0100007F:A92D 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 73538 1 0000000000000000 100 0 0 10 0",
  "   1: 0100007F:A92D 0100007F:C350 01 00000000:00000000 00:00000000 00000000     0        0 73600 1 0000000000000000 20 4 30 10 -1",
  "   2: 0100007F:C350 0100007F:A92D 01 00000000:00000000 00:00000000 00000000  1000        0 73599 1 0000000000000000 20 4 30 10 -1",
  "",
].join("\n");
// ::1 port 8765 <- ::1 port 40000, and an IPv4-mapped client of a dual-stack server.
const ipv6 = [
  header,
  "   0: 00000000000000000000000001000000:223D 00000000000000000000000001000000:9C40 01 00000000:00000000 00:00000000 00000000     0        0 1 1 0 20 4 30 10 -1",
  "   1: 00000000000000000000000001000000:9C40 00000000000000000000000001000000:223D 01 00000000:00000000 00:00000000 00000000  1001        0 2 1 0 20 4 30 10 -1",
  "   2: 0000000000000000FFFF00000100007F:9C41 0000000000000000FFFF00000100007F:223D 01 00000000:00000000 00:00000000 00000000  1002        0 3 1 0 20 4 30 10 -1",
].join("\n");

describe("peer uid (Linux /proc/net/tcp)", () => {
  it("reads addresses in the kernel's host-order words and ports as numbers", () => {
    const rows = parseProcNetTcp(ipv4, true);
    expect(rows).toHaveLength(3);
    expect(rows[2]!.local.address.equals(addressBytes("127.0.0.1")!)).toBe(true);
    expect([rows[2]!.local.port, rows[2]!.remote.port, rows[2]!.uid]).toEqual([50000, 43309, 1000]);
    // A big-endian machine prints the same address the other way round.
    const be = parseProcNetTcp(ipv4.replaceAll("0100007F", "7F000001"), false);
    expect(be[2]!.local.address.equals(addressBytes("127.0.0.1")!)).toBe(true);
    expect(parseProcNetTcp("garbage\n   0: zz\n")).toEqual([]);
  });

  it("treats IPv4 and IPv4-mapped IPv6 as the same address", () => {
    expect(addressBytes("::ffff:127.0.0.1")!.equals(addressBytes("127.0.0.1")!)).toBe(true);
    expect(addressBytes("::1")!.toString("hex")).toBe("00000000000000000000000000000001");
    expect(addressBytes("fe80::1%eth0")!.toString("hex")).toBe("fe800000000000000000000000000001");
    expect(addressBytes("localhost")).toBeNull();
  });

  it("finds the client's end of the connection, not the server's", () => {
    const server = { address: "127.0.0.1", port: 43309 };
    expect(socketOwner([ipv4], { address: "127.0.0.1", port: 50000 }, server, true)).toBe(1000);
    expect(socketOwner([ipv4], { address: "127.0.0.1", port: 50001 }, server, true)).toBeNull();
    expect(socketOwner([ipv4, ipv6], { address: "::1", port: 40000 }, { address: "::1", port: 8765 }, true)).toBe(1001);
    expect(socketOwner([ipv4, ipv6], { address: "::ffff:127.0.0.1", port: 40001 }, { address: "::ffff:127.0.0.1", port: 8765 }, true)).toBe(1002);
  });

  it.runIf(process.platform === "linux")("looks up a live loopback connection: this process's own uid", async () => {
    const server = createServer();
    const accepted = new Promise<Socket>((resolve) => server.once("connection", resolve));
    await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
    const port = (server.address() as { port: number }).port;
    const client = connect(port, "127.0.0.1");
    try {
      const socket = await accepted;
      expect(await peerUid(socket)).toBe(process.getuid!());
    } finally {
      client.destroy();
      server.close();
    }
  });
});
