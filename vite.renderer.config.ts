// Builds the renderer (app/renderer) into dist/renderer. Relative asset paths,
// so the same build loads from file:// (Electron) and from /app/ (web mode).
import { fileURLToPath } from "node:url";

import { defineConfig } from "vite";

export default defineConfig({
  root: fileURLToPath(new URL("./app/renderer", import.meta.url)),
  base: "./",
  publicDir: false,
  oxc: { jsx: { runtime: "automatic" } },
  build: {
    outDir: fileURLToPath(new URL("./dist/renderer", import.meta.url)),
    emptyOutDir: true,
    sourcemap: true,
    target: "es2023",
    chunkSizeWarningLimit: 1024,
    // The CSP takes fonts from 'self' only (font-src): KaTeX's fonts stay files, never data: URIs.
    assetsInlineLimit: (file: string) => (/\.(woff2?|ttf|otf)$/i.test(file) ? false : undefined),
  },
});
