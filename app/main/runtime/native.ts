// Loads the compiled addon (build/Release/guild_addon.node) exactly once.
import { existsSync } from "node:fs";
import { createRequire } from "node:module";

import { addonPath } from "../paths.js";
import type { NativeBinding } from "./native-types.js";

let binding: NativeBinding | undefined;

/** Thrown when the addon is missing or cannot be loaded. */
export class NativeAddonError extends Error {
  override name = "NativeAddonError";
}

export function loadNative(): NativeBinding {
  if (binding !== undefined) return binding;
  const file = addonPath();
  if (!existsSync(file)) {
    throw new NativeAddonError(`native addon not found at ${file}; build it with \`npm ci\` or \`npm run build:native\``);
  }
  let loaded: NativeBinding;
  try {
    loaded = createRequire(import.meta.url)(file) as NativeBinding;
  } catch (err) {
    throw new NativeAddonError(`cannot load the native addon ${file}: ${(err as Error).message}`);
  }
  if (loaded.abiVersion() !== loaded.compiledAbiVersion) {
    throw new NativeAddonError(
      `native addon ${file} was built against C ABI ${loaded.compiledAbiVersion} but the runtime reports ${loaded.abiVersion()}`,
    );
  }
  binding = loaded;
  return binding;
}
