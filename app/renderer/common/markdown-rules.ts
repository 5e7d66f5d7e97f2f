// The rules that make model output safe to show (it is untrusted): the
// sanitizer's schema, the URL filter and the KaTeX limits used by Markdown.tsx.
// Raw HTML in markdown is shown as text, never parsed; links go to http(s),
// mailto or in-page anchors only; images are never loaded (the CSP would
// refuse remote ones anyway: they become links); math runs without KaTeX's
// "trust" (no \href, \url, \htmlClass…) under size and expansion limits.
import type { KatexOptions } from "katex";
import { defaultSchema, type Options as SanitizeSchema } from "rehype-sanitize";

/** GitHub's sanitizer schema, plus the classes remark-math gives math (Markdown.tsx hands those to KaTeX). */
export const sanitizeSchema: SanitizeSchema = {
  ...defaultSchema,
  attributes: {
    ...defaultSchema.attributes,
    code: [["className", /^language-./, "math-inline", "math-display"]],
  },
};

export const katexOptions: KatexOptions = {
  throwOnError: false,
  strict: "ignore",
  trust: false,
  maxSize: 50,
  maxExpand: 500,
  output: "htmlAndMathml",
};

/** A link's URL as rendered: http(s), mailto and "#anchor" only; anything else (javascript:, data:, relative paths) becomes "". */
export function safeUrl(url: string): string {
  // Browsers drop control characters and spaces inside a scheme ("java\tscript:"): so does this check.
  const u = url.trim();
  if (u.startsWith("#")) return u;
  return /^(https?|mailto):/i.test(u.replace(/[\u0000-\u0020\u007f]+/g, "")) && /^(https?|mailto):/i.test(u) ? u : "";
}

interface MdNode { type: string; value?: string; children?: MdNode[] }
/** Parents whose children are blocks: raw HTML there becomes a paragraph of text. */
const flowParents = new Set(["root", "blockquote", "listItem", "footnoteDefinition"]);

/** A remark plugin: raw HTML (block or inline) becomes plain text, shown as the model wrote it. */
export function remarkHtmlAsText() {
  const walk = (node: MdNode) => {
    const children = node.children;
    if (!children) return;
    children.forEach((child, i) => {
      if (child.type === "html") {
        const text: MdNode = { type: "text", value: child.value ?? "" };
        children[i] = flowParents.has(node.type) ? { type: "paragraph", children: [text] } : text;
      } else walk(child);
    });
  };
  return (tree: unknown) => walk(tree as MdNode);
}
