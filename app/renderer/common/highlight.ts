// A small syntax highlighter for code blocks: comments, strings, numbers,
// keywords, for C-like languages, Python, shell and JSON. Returns spans.
export type TokenKind = "plain" | "comment" | "string" | "number" | "keyword";
export interface Token { kind: TokenKind; text: string }

const keywords = new Set((
  "abstract as async await break case catch class const continue def default del do elif else enum export extends false " +
  "final finally fn for from func function go if impl import in interface is lambda let match mod module new nil none " +
  "None null pass private protected pub public raise return self static struct super switch this throw true True False try " +
  "type typeof undefined use var void while with yield int float double char bool string auto unsigned long short echo " +
  "fi then esac done local export"
).split(" "));

export function highlight(code: string, lang: string): Token[] {
  const hashComments = /^(py|python|sh|bash|shell|zsh|rb|ruby|yaml|yml|toml|r|perl)$/i.test(lang);
  const slashComments = !/^(py|python|sh|bash|shell|zsh|yaml|yml|toml|json)$/i.test(lang);
  const out: Token[] = [];
  const push = (kind: TokenKind, text: string) => {
    const last = out.at(-1);
    if (last && last.kind === kind) last.text += text;
    else out.push({ kind, text });
  };
  let i = 0;
  while (i < code.length) {
    const rest = code.slice(i);
    let m: RegExpExecArray | null;
    if (slashComments && (m = /^\/\/[^\n]*|^\/\*[\s\S]*?(\*\/|$)/.exec(rest))) push("comment", m[0]);
    else if (hashComments && (m = /^#[^\n]*/.exec(rest))) push("comment", m[0]);
    else if ((m = /^("(?:[^"\\\n]|\\.)*"?|'(?:[^'\\\n]|\\.)*'?|`(?:[^`\\]|\\.)*`?)/.exec(rest))) push("string", m[0]);
    else if ((m = /^\b(0x[0-9a-f]+|\d+(\.\d+)?(e[+-]?\d+)?)\b/i.exec(rest))) push("number", m[0]);
    else if ((m = /^[A-Za-z_$][\w$]*/.exec(rest))) push(keywords.has(m[0]) ? "keyword" : "plain", m[0]);
    else m = null;
    if (m) { i += m[0].length; continue; }
    push("plain", code[i]!);
    i++;
  }
  return out;
}
