// Bundles the preload (app/preload/preload.cts) into one CommonJS file: a
// sandboxed preload cannot require our other modules, only "electron".
import { fileURLToPath } from "node:url";

import { defineConfig } from "vite";

export default defineConfig({
  publicDir: false,
  build: {
    outDir: fileURLToPath(new URL("./dist/preload", import.meta.url)),
    emptyOutDir: true,
    minify: false,
    target: "node20",
    lib: {
      entry: fileURLToPath(new URL("./app/preload/preload.cts", import.meta.url)),
      formats: ["cjs"],
      fileName: () => "preload.cjs",
    },
    rollupOptions: { external: ["electron"] },
  },
});
