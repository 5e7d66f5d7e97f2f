// The native test build's misbehaving package libraries
// (native/tests/package_libs: a query() that segfaults, a constructor that
// exits or never returns, a valid one whose constructor leaves a mark) as
// .gkpkg archives, for the tests of the install checks. Found through
// GUILD_TEST_PACKAGE_LIBS, default build/native-tests/test-package-libs (what
// `npm run test:native` builds).
import { createHash } from "node:crypto";
import { existsSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import path from "node:path";

import { projectRoot } from "../main/paths.js";

export const testPackageLibsDir =
  process.env["GUILD_TEST_PACKAGE_LIBS"] ?? path.join(projectRoot(), "build", "native-tests", "test-package-libs");

/** Why tests that need the test libraries must skip, or "" when they can run. */
export const testPackageLibsSkipReason = existsSync(path.join(testPackageLibsDir, "libtest-query-segv.so"))
  ? ""
  : `test package libraries not found in ${testPackageLibsDir} (build the native tests or set GUILD_TEST_PACKAGE_LIBS)`;

/** Writes `<name>.gkpkg` (docs/PACKAGES.md layout) of test library `name` ("test-ok", "test-query-segv", …) into dir. */
export function writeTestArchive(dir: string, name: string): string {
  const library = readFileSync(path.join(testPackageLibsDir, `lib${name}.so`));
  const manifest = Buffer.from(
    JSON.stringify({
      name,
      version: "1.0.0",
      abi: 1,
      description: "test library",
      provides: [{ op: "float_ops", types: ["F32"], device: "cpu" }],
      library: `lib${name}.so`,
      sha256: createHash("sha256").update(library).digest("hex"),
    }),
  );
  const header = Buffer.alloc(24);
  header.write("GUILDPKG", 0, "latin1");
  header.writeUInt32LE(1, 8);
  header.writeUInt32LE(manifest.length, 12);
  header.writeBigUInt64LE(BigInt(library.length), 16);
  const body = Buffer.concat([header, manifest, library]);
  const file = path.join(dir, `${name}.gkpkg`);
  writeFileSync(file, Buffer.concat([body, createHash("sha256").update(body).digest()]));
  return file;
}

/** The processes test library `name`'s constructor ran in, from its marks in `marks` (`<name>.<pid>`). */
export function constructorRanIn(marks: string, name: string): number[] {
  if (!existsSync(marks)) return [];
  return readdirSync(marks)
    .filter((f) => f.startsWith(`${name}.`))
    .map((f) => Number(f.slice(name.length + 1)));
}

/** What state changes left in a packages directory: staging, old and removing folders, temporary files. */
export function stagingLeftovers(dir: string): string[] {
  if (!existsSync(dir)) return [];
  return readdirSync(dir).filter((f) => /^\.(staging|old|removing)-/.test(f) || f.includes(".tmp."));
}
