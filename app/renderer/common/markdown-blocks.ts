// A streaming reply's markdown as top-level blocks: the settled ones, which no
// text appended later can change (rendered once, memoized), and the open rest,
// re-rendered as tokens arrive. Without this split every token re-parsed and
// re-rendered the whole reply, a cost quadratic in its length (a 4,000-token
// reply froze the page for over 30 s).
//
// The blocks are the ones the chat's own parser sees: remark-parse with the same
// syntax extensions as Markdown.tsx (GFM, math), run on the open rest only. A
// top-level block is settled when the block after it begins on a complete line
// (a line still being written, like "2" that may become "2. item" and continue
// an ordered list, decides nothing) and a blank line lies between the two: code
// fences, math blocks, lists, tables, block quotes and HTML blocks never end
// inside a region the parser still reads as one of them, and a blank line then a
// new block closes any of them for good. A settled block rendered alone renders
// as it does within the whole text, with one exception handled by the caller:
// link reference definitions and footnotes join blocks across the text, so the
// complete reply is rendered whole (Markdown), exactly as a stored one.
import remarkGfm from "remark-gfm";
import remarkMath from "remark-math";
import remarkParse from "remark-parse";
import { unified } from "unified";

const parser = unified().use(remarkParse).use(remarkGfm).use(remarkMath);

interface Positioned { position?: { start: { offset?: number }; end: { offset?: number } } }

/** A blank line (only spaces or tabs) between two line endings. */
const blankLine = /(?:\r\n|\r|\n)[ \t]*(?:\r\n|\r|\n)/;

/** Where the line holding `at` begins. */
function lineStart(text: string, at: number): number {
  for (let i = at; i > 0; i--) if (text[i - 1] === "\n" || text[i - 1] === "\r") return i;
  return 0;
}

/**
 * Offsets in `text` (markdown that may still grow) where settled top-level blocks
 * end: each one the start of the line the next block begins on. Empty when nothing is
 * settled yet.
 */
export function settledCuts(text: string): number[] {
  const children = (parser.parse(text) as { children: Positioned[] }).children;
  const cuts: number[] = [];
  const lastBreak = Math.max(text.lastIndexOf("\n"), text.lastIndexOf("\r"));
  for (let k = 0; k + 1 < children.length; k++) {
    const end = children[k]!.position?.end.offset;
    const next = children[k + 1]!.position?.start.offset;
    if (end === undefined || next === undefined) return cuts;
    // The next block's first line must be complete (a line ending follows it).
    if (lastBreak < next) break;
    if (!blankLine.test(text.slice(end, next))) continue;
    cuts.push(lineStart(text, next));
  }
  return cuts;
}

/** The text as settled blocks (rendered once) and the open rest (rendered again as it grows). */
export interface MarkdownSplit {
  settled: readonly string[];
  open: string;
}

/**
 * Splits a growing text incrementally: only the open rest is parsed again on each
 * update. A text that does not begin with what was settled (a reply replaced, a
 * reasoning part re-joined) starts the split over.
 */
export class MarkdownBlocks {
  private settled: string[] = [];
  private settledText = "";

  update(text: string): MarkdownSplit {
    if (!text.startsWith(this.settledText)) {
      this.settled = [];
      this.settledText = "";
    }
    const rest = text.slice(this.settledText.length);
    let from = 0;
    const added: string[] = [];
    for (const cut of settledCuts(rest)) {
      if (cut > from) added.push(rest.slice(from, cut));
      from = cut;
    }
    if (added.length > 0) {
      this.settled = [...this.settled, ...added];
      this.settledText += rest.slice(0, from);
    }
    return { settled: this.settled, open: rest.slice(from) };
  }
}

/** The split of a text taken all at once (what an incremental split must always agree with). */
export function splitMarkdown(text: string): MarkdownSplit {
  return new MarkdownBlocks().update(text);
}
