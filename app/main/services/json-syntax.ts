// Where a JSON text first goes wrong, as a UTF-8 byte offset: what a parse
// error may say about a file without quoting it (V8's JSON.parse messages
// quote the text around the error, which must not reach the user for a file
// that was never JSON, e.g. a password file).
// Iterative (an explicit stack), so deeply nested input cannot overflow the call stack.

/** The UTF-8 byte offset of the first syntax error in `text`, or null when it is valid JSON. */
export function jsonSyntaxErrorOffset(text: string): number | null {
  const at = firstErrorIndex(text);
  return at === null ? null : Buffer.byteLength(text.slice(0, at), "utf8");
}

function firstErrorIndex(text: string): number | null {
  const n = text.length;
  const open: ("{" | "[")[] = [];
  let i = 0;
  const skipSpace = () => {
    while (i < n) {
      const c = text.charCodeAt(i);
      if (c !== 0x20 && c !== 0x09 && c !== 0x0a && c !== 0x0d) break;
      i++;
    }
  };
  const digits = () => {
    const start = i;
    while (i < n && text.charCodeAt(i) >= 0x30 && text.charCodeAt(i) <= 0x39) i++;
    return i > start;
  };
  const string = (): boolean => {
    if (text[i] !== '"') return false;
    i++;
    while (i < n) {
      const c = text.charCodeAt(i);
      if (c === 0x22) { i++; return true; }
      if (c < 0x20) return false;
      if (c === 0x5c) {
        const e = text[i + 1];
        if (e !== undefined && '"\\/bfnrt'.includes(e)) i += 2;
        else if (e === "u" && /^[0-9A-Fa-f]{4}$/.test(text.slice(i + 2, i + 6))) i += 6;
        else { i++; return false; }
      } else i++;
    }
    return false;
  };
  const number = (): boolean => {
    if (text[i] === "-") i++;
    if (text[i] === "0") i++;
    else if (!digits()) return false;
    if (text[i] === ".") { i++; if (!digits()) return false; }
    if (text[i] === "e" || text[i] === "E") {
      i++;
      if (text[i] === "+" || text[i] === "-") i++;
      if (!digits()) return false;
    }
    return true;
  };
  const scalar = (): boolean => {
    const c = text[i];
    if (c === '"') return string();
    if (c === "-" || (c !== undefined && c >= "0" && c <= "9")) return number();
    for (const word of ["true", "false", "null"]) {
      if (text.startsWith(word, i)) { i += word.length; return true; }
    }
    return false;
  };
  // An object member's key and colon; leaves i at the value.
  const key = (): boolean => {
    skipSpace();
    if (!string()) return false;
    skipSpace();
    if (text[i] !== ":") return false;
    i++;
    return true;
  };

  skipSpace();
  for (;;) {
    // A value is expected at i.
    skipSpace();
    const c = text[i];
    if (c === "{" || c === "[") {
      i++;
      skipSpace();
      if (text[i] === (c === "{" ? "}" : "]")) i++;
      else {
        open.push(c);
        if (c === "{" && !key()) return i;
        continue;
      }
    } else if (!scalar()) return i;
    // After a value: close what it ends, or move on to the next element.
    for (;;) {
      skipSpace();
      const top = open.at(-1);
      if (top === undefined) return i < n ? i : null;
      if (text[i] === ",") {
        i++;
        if (top === "{" && !key()) return i;
        break;
      }
      if (text[i] === (top === "{" ? "}" : "]")) {
        i++;
        open.pop();
        continue;
      }
      return i;
    }
  }
}
