// Markdown for model output (untrusted): GitHub-flavoured markdown (tables,
// task lists, strikethrough, autolinks, footnotes) with react-markdown +
// remark-gfm, math with remark-math + KaTeX, code highlighting with
// rehype-highlight. rehype-sanitize (GitHub's schema) runs on what the
// markdown produced, before the highlighter adds its spans; markdown-rules.ts
// has the rest of the rules. KaTeX renders each formula into its element with
// DOM calls (katex.render: styles through CSSOM), not through an HTML parser,
// so its inline styles pass the CSP (style-src 'self'); its stylesheet and
// fonts are bundled files (katex.min.css). A reply still streaming renders
// through StreamingMarkdown: its settled blocks once each, its open rest as it
// grows (markdown-blocks.ts), with the same plugins, rules and components.
import "katex/dist/katex.min.css";

import katex from "katex";
import { Fragment, memo, useLayoutEffect, useRef, useState, type ComponentProps, type ReactNode } from "react";
import ReactMarkdown, { type Components } from "react-markdown";
import rehypeHighlight from "rehype-highlight";
import rehypeSanitize from "rehype-sanitize";
import remarkGfm from "remark-gfm";
import remarkMath from "remark-math";

import { copyText } from "./clipboard.js";
import { MarkdownBlocks } from "./markdown-blocks.js";
import { katexOptions, remarkHtmlAsText, safeUrl, sanitizeSchema } from "./markdown-rules.js";

const remarkPlugins = [remarkGfm, remarkMath, remarkHtmlAsText];
// rehype-highlight's transform, made once: its attacher registers every common grammar
// (lowlight's createLowlight), and react-markdown runs the attachers on every render. The
// transform itself keeps no state between trees.
const highlightCode = rehypeHighlight({ detect: false, plainText: ["math"] });
const rehypeHighlightOnce = () => highlightCode;
const rehypePlugins: NonNullable<ComponentProps<typeof ReactMarkdown>["rehypePlugins"]> = [
  [rehypeSanitize, sanitizeSchema],
  rehypeHighlightOnce,
];

interface HastNode { type: string; value?: string; tagName?: string; properties?: Record<string, unknown>; children?: HastNode[] }
const textOf = (n: HastNode | undefined): string => (n ? (n.value ?? "") + (n.children ?? []).map(textOf).join("") : "");
const classesOf = (n: HastNode | undefined): string[] => (n?.properties?.["className"] ?? []) as string[];
const isMath = (n: HastNode | undefined) => classesOf(n).some((c) => c === "math-inline" || c === "math-display");

/** A formula (remark-math's `$…$` or `$$…$$`), typeset by KaTeX into an element React leaves alone. */
export function MathTex({ tex, display }: { tex: string; display: boolean }) {
  const ref = useRef<HTMLSpanElement>(null);
  useLayoutEffect(() => {
    const el = ref.current;
    if (!el) return;
    try {
      katex.render(tex, el, { ...katexOptions, displayMode: display, throwOnError: true });
    } catch (err) {
      if (!(err instanceof katex.ParseError)) throw err;
      // What KaTeX shows of a formula it cannot read (throwOnError: false), less the style
      // attribute it sets on it: the CSP refuses that (style-src 'self') and logs an error.
      const shown = document.createElement("span");
      shown.className = "katex-error";
      shown.title = String(err);
      shown.textContent = tex;
      el.replaceChildren(shown);
    }
  }, [tex, display]);
  return <span ref={ref} className={display ? "math math-display" : "math math-inline"} data-tex={tex} />;
}

export function CodeBlock({ lang, code, children }: { lang: string; code: string; children: ReactNode }) {
  const [copied, setCopied] = useState(false);
  const copy = () => {
    void copyText(code).then(() => {
      setCopied(true);
      setTimeout(() => setCopied(false), 1200);
    }, () => undefined);
  };
  return (
    <div className="code-block">
      <div className="code-head">
        <span>{lang || "code"}</span>
        <button type="button" className="small" onClick={copy} aria-label="Copy code">{copied ? "Copied" : "Copy"}</button>
      </div>
      <pre>{children}</pre>
    </div>
  );
}

const components: Components = {
  a: ({ href, children }) => (href
    ? <a href={href} target="_blank" rel="noopener noreferrer">{children}</a>
    : <span className="md-link-refused" title="link removed: only http(s) and mailto links are kept">{children}</span>),
  // Never loaded: a remote image would reach out of the app (and the CSP refuses it); the link stays.
  img: ({ src, alt }) => {
    const url = typeof src === "string" ? safeUrl(src) : "";
    const label = `image: ${alt || "untitled"}`;
    return url ? <a className="md-image" href={url} target="_blank" rel="noopener noreferrer">[{label}]</a> : <span className="md-image">[{label}]</span>;
  },
  pre: ({ node, children }) => {
    const code = (node as HastNode | undefined)?.children?.find((c) => c.tagName === "code");
    if (isMath(code)) return <div className="math-block"><MathTex tex={textOf(code)} display /></div>;
    const lang = classesOf(code).find((c) => c.startsWith("language-"))?.slice("language-".length) ?? "";
    return <CodeBlock lang={lang} code={textOf(code).replace(/\n$/, "")}>{children}</CodeBlock>;
  },
  code: ({ node, className, children }) => (isMath(node as HastNode | undefined)
    ? <MathTex tex={textOf(node as HastNode)} display={false} />
    : <code className={className}>{children}</code>),
  table: ({ children }) => <div className="md-table"><table>{children}</table></div>,
};

/** The one pipeline every piece of model output goes through: parse, sanitize, highlight, render. */
function renderMarkdown(text: string): ReactNode {
  return (
    <ReactMarkdown remarkPlugins={remarkPlugins} rehypePlugins={rehypePlugins} components={components} urlTransform={safeUrl}>
      {text}
    </ReactMarkdown>
  );
}

export function Markdown({ text, className = "markdown" }: { text: string; className?: string }) {
  return <div className={className}>{renderMarkdown(text)}</div>;
}

/** A settled block: rendered when it first settles, then never again (its text no longer changes). */
const MarkdownBlock = memo(function MarkdownBlock({ text }: { text: string }) {
  return <>{renderMarkdown(text)}</>;
});

/**
 * Markdown that is still being written (a streaming reply): the settled blocks
 * render once each and only the open rest renders again as the text grows. The
 * blocks sit side by side as the whole text's blocks do (a line break between
 * two), so the page shows what Markdown would show of the same text; the caller
 * switches to Markdown once the text is complete (definitions and footnotes join
 * blocks across the text).
 */
export function StreamingMarkdown({ text, className = "markdown" }: { text: string; className?: string }) {
  const blocks = useRef<MarkdownBlocks | null>(null);
  blocks.current ??= new MarkdownBlocks();
  const { settled, open } = blocks.current.update(text);
  const all = open === "" ? settled : [...settled, open];
  return (
    <div className={className}>
      {all.map((block, i) => (
        <Fragment key={i}>
          {i > 0 && "\n"}
          <MarkdownBlock text={block} />
        </Fragment>
      ))}
    </div>
  );
}
