// Markdown for model output (untrusted): GitHub-flavoured markdown (tables,
// task lists, strikethrough, autolinks, footnotes) with react-markdown +
// remark-gfm, math with remark-math + KaTeX, code highlighting with
// rehype-highlight. rehype-sanitize (GitHub's schema) runs on what the
// markdown produced, before the highlighter adds its spans; markdown-rules.ts
// has the rest of the rules. KaTeX renders each formula into its element with
// DOM calls (katex.render: styles through CSSOM), not through an HTML parser,
// so its inline styles pass the CSP (style-src 'self'); its stylesheet and
// fonts are bundled files (katex.min.css).
import "katex/dist/katex.min.css";

import katex from "katex";
import { useLayoutEffect, useRef, useState, type ComponentProps, type ReactNode } from "react";
import ReactMarkdown, { type Components } from "react-markdown";
import rehypeHighlight from "rehype-highlight";
import rehypeSanitize from "rehype-sanitize";
import remarkGfm from "remark-gfm";
import remarkMath from "remark-math";

import { copyText } from "./clipboard.js";
import { katexOptions, remarkHtmlAsText, safeUrl, sanitizeSchema } from "./markdown-rules.js";

const remarkPlugins = [remarkGfm, remarkMath, remarkHtmlAsText];
const rehypePlugins: NonNullable<ComponentProps<typeof ReactMarkdown>["rehypePlugins"]> = [
  [rehypeSanitize, sanitizeSchema],
  [rehypeHighlight, { detect: false, plainText: ["math"] }],
];

interface HastNode { type: string; value?: string; tagName?: string; properties?: Record<string, unknown>; children?: HastNode[] }
const textOf = (n: HastNode | undefined): string => (n ? (n.value ?? "") + (n.children ?? []).map(textOf).join("") : "");
const classesOf = (n: HastNode | undefined): string[] => (n?.properties?.["className"] ?? []) as string[];
const isMath = (n: HastNode | undefined) => classesOf(n).some((c) => c === "math-inline" || c === "math-display");

/** A formula (remark-math's `$…$` or `$$…$$`), typeset by KaTeX into an element React leaves alone. */
export function MathTex({ tex, display }: { tex: string; display: boolean }) {
  const ref = useRef<HTMLSpanElement>(null);
  useLayoutEffect(() => {
    if (ref.current) katex.render(tex, ref.current, { ...katexOptions, displayMode: display });
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

export function Markdown({ text, className = "markdown" }: { text: string; className?: string }) {
  return (
    <div className={className}>
      <ReactMarkdown remarkPlugins={remarkPlugins} rehypePlugins={rehypePlugins} components={components} urlTransform={safeUrl}>
        {text}
      </ReactMarkdown>
    </div>
  );
}
