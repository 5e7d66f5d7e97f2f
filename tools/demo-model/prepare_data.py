#!/usr/bin/env python3
"""Build the training corpus for Guild's demo chat model from Debian packages.

Sources (see DATA_LICENSES.md):
  * wordnet-base   -> short chat exchanges about English words (definitions,
                      examples, synonyms, opposites, categories, plurals, ...)
  * bible-kjv-text -> plain English prose (King James Version, chapter per
                      document), decoded with the `bible` program (bible-kjv)
  * our own hand-written conversational seeds (greetings, who-are-you, ...)
  * optional: fortunes-min (--with-fortunes; off by default, see licences)

Install first (as root):
  apt-get update && apt-get install -y --no-install-recommends wordnet-base bible-kjv-text bible-kjv

Output (regenerated, git-ignored):
  tools/demo-model/data/corpus.jsonl   one {"src": ..., "text": ...} per line;
                                       text is a finished document in the
                                       ChatML-style chat format (or plain prose)
  tools/demo-model/data/corpus_stats.json

Every document is later followed by <|endoftext|> when tokenized.
"""
import argparse
import json
import os
import random
import re
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from chat_format import render_chat  # noqa: E402

WORDNET_DIR = "/usr/share/wordnet"
BIBLE_DATA = "/usr/lib/bible.data"
FORTUNE_DIR = "/usr/share/games/fortunes"

POS_FILES = {"n": "noun", "v": "verb", "a": "adj", "r": "adv"}
POS_NAME = {"n": "noun", "v": "verb", "a": "adjective", "s": "adjective", "r": "adverb"}

# --------------------------------------------------------------------------
# WordNet parsing (format: wndb(5WN))


class Synset:
    __slots__ = ("offset", "pos", "words", "ptrs", "defs", "examples")

    def __init__(self, offset, pos, words, ptrs, defs, examples):
        self.offset, self.pos, self.words, self.ptrs = offset, pos, words, ptrs
        self.defs, self.examples = defs, examples


def clean_word(w):
    w = re.sub(r"\((a|p|ip)\)$", "", w)  # adjective syntactic markers
    return w.replace("_", " ")


def clean_text(t):
    t = t.replace("``", '"').replace("''", '"')
    t = re.sub(r"`([^']*)'", r"'\1'", t)  # `to' -> 'to'
    t = t.replace("`", "'")
    t = re.sub(r"\s+", " ", t).strip()
    return t


def split_gloss(gloss):
    """Split a WordNet gloss into definitions and quoted examples."""
    defs, examples = [], []
    # examples are double-quoted; definitions are the rest, ';'-separated
    for m in re.finditer(r'"([^"]*)"', gloss):
        ex = clean_text(m.group(1))
        if len(ex) > 3:
            examples.append(ex)
    rest = re.sub(r'"[^"]*"', "", gloss)
    for part in rest.split(";"):
        part = clean_text(part).strip(" ;:,")
        if len(part) > 1:
            defs.append(part)
    return defs, examples


def parse_data(path, pos_file):
    out = {}
    with open(path, encoding="latin-1") as f:
        for line in f:
            if line.startswith("  "):
                continue  # licence header
            head, _, gloss = line.partition(" | ")
            fields = head.split()
            offset, pos = fields[0], fields[2]
            n_words = int(fields[3], 16)
            i = 4
            words = []
            for _ in range(n_words):
                words.append(clean_word(fields[i]))
                i += 2
            n_ptr = int(fields[i])
            i += 1
            ptrs = []
            for _ in range(n_ptr):
                sym, off, ppos, st = fields[i:i + 4]
                ptrs.append((sym, off, ppos, int(st[:2], 16), int(st[2:], 16)))
                i += 4
            defs, examples = split_gloss(gloss.strip())
            out[(pos_file, offset)] = Synset(offset, pos, words, ptrs, defs, examples)
    return out


def parse_index(path, pos_file):
    out = []
    with open(path, encoding="latin-1") as f:
        for line in f:
            if line.startswith("  "):
                continue
            fields = line.split()
            lemma = fields[0]
            n_syn = int(fields[2])
            n_ptr = int(fields[3])
            tagged = int(fields[5 + n_ptr])
            offsets = fields[6 + n_ptr:6 + n_ptr + n_syn]
            out.append((lemma, pos_file, tagged, offsets))
    return out


def load_wordnet(d):
    synsets, index = {}, []
    for p, name in POS_FILES.items():
        synsets.update(parse_data(os.path.join(d, "data." + name), p))
        index.extend(parse_index(os.path.join(d, "index." + name), p))
    plurals = {}
    with open(os.path.join(d, "noun.exc"), encoding="latin-1") as f:
        for line in f:
            parts = line.split()
            if len(parts) >= 2 and parts[0] != parts[1]:
                plurals.setdefault(parts[1], parts[0])
    return synsets, index, plurals


# --------------------------------------------------------------------------
# English helpers

def article(w):
    lw = w.lower()
    if re.match(r"(hour|honest|honor|honour|heir)", lw):
        return "an"
    if re.match(r"(uni|use|usu|uti|eu|one|once|ubi|ure)", lw):
        return "a"
    return "an" if lw[:1] in "aeiou" else "a"


def cap(s):
    return s[:1].upper() + s[1:] if s else s


def end_sentence(s):
    s = s.rstrip()
    return s if s.endswith((".", "!", "?")) else s + "."


def quote_word(w):
    return '"' + w + '"'


def join_list(items):
    items = [quote_word(x) for x in items]
    if len(items) == 1:
        return items[0]
    return ", ".join(items[:-1]) + " and " + items[-1]


NOUN_GLOSS_START = re.compile(r"^(a|an|any|one|someone|something|somebody|either)\b", re.I)


def definition_sentence(word, pos, d):
    """A full English sentence that defines `word` (sense gloss `d`)."""
    if pos == "n" and NOUN_GLOSS_START.match(d):
        return end_sentence(f"{cap(article(word))} {word} is {d}") if word[:1].islower() \
            else end_sentence(f"{word} is {d}")
    if pos == "v":
        return end_sentence(f"To {word} means to {d}")
    return end_sentence(f"{quote_word(cap(word) if word[:1].islower() else word)} means {d}")


def pick_example(word, ss, rng):
    """Prefer an example that contains the word (or its stem)."""
    if not ss.examples:
        return None
    stem = word.lower()[:max(3, len(word) - 2)]
    good = [e for e in ss.examples if stem in e.lower()]
    return rng.choice(good or ss.examples) if good or rng.random() < 0.3 else None


# --------------------------------------------------------------------------
# Exchange generators: each returns a list of (user, assistant) pairs

DEFINE_Q = [
    "What does {w} mean?", "What does {w} mean?", "What does the word {w} mean?", "What is the meaning of {w}?",
    "Define {w}.", "Define {w}", "define {w}", "What's the definition of {w}?", "Can you tell me what {w} means?",
    "Explain the word {w}.", "what does {w} mean", "Meaning of {w}?", "What does \"{w}\" mean?",
    "Please define the word {w}.", "I don't know the word {w}. What does it mean?", "Tell me what {w} means.",
    "{w}: what does that mean?", "What is meant by {w}?",
]
DEFINE_Q_NOUN = ["What is {a} {w}?", "What's {a} {w}?", "what is {a} {w}", "Tell me about {a} {w}.",
                 "Can you explain what {a} {w} is?"]
DEFINE_Q_VERB = ["What does it mean to {w}?", "What does \"to {w}\" mean?", "Explain the verb {w}."]
DEFINE_Q_ADJ = ["What does it mean to be {w}?", "What does the adjective {w} mean?"]
EXAMPLE_Q = ["Give me an example of {w} in a sentence.", "Use {w} in a sentence.",
             "Can you use the word {w} in a sentence?", "Show me how to use {w}.",
             "How is the word {w} used?", "Give me an example with {w}.", "use {w} in a sentence"]
SYN_Q = ["What is another word for {w}?", "Give me a synonym for {w}.", "What are some synonyms of {w}?",
         "What's a synonym for {w}?", "Which words mean the same as {w}?", "another word for {w}?"]
ANT_Q = ["What is the opposite of {w}?", "What's the opposite of {w}?", "Give me an antonym of {w}.",
         "What is an antonym for {w}?", "opposite of {w}?"]
KIND_Q = ["What kind of thing is {a} {w}?", "What category does {w} belong to?", "{a_cap} {w} is a type of what?",
          "What is {a} {w} a kind of?"]
POS_Q = ["What part of speech is {w}?", "Is {w} a noun or a verb?", "What kind of word is {w}?",
         "Is {w} a noun?", "Is {w} an adjective?"]
MULTI_Q = ["What are the meanings of {w}?", "What are the different meanings of {w}?",
           "Can {w} mean more than one thing?", "List the meanings of {w}."]
PLURAL_Q = ["What is the plural of {w}?", "What's the plural of {w}?", "How do you say more than one {w}?",
            "plural of {w}?"]
SPELL_Q = ["How do you spell {w}?", "Spell {w}.", "How is {w} spelled?"]
EXAMPLE_A = ["Here is an example: \"{e}\"", "Sure: \"{e}\"", "For example: \"{e}\"", "You could say: \"{e}\"",
             "An example sentence is: \"{e}\""]


def fill(t, w):
    a = article(w)
    return t.format(w=w, a=a, a_cap=cap(a))


def define_answer(word, pos, ss, rng, with_example=True):
    ans = definition_sentence(word, pos, ss.defs[0])
    if len(ss.defs) > 1 and rng.random() < 0.3:
        ans += " " + end_sentence(cap(ss.defs[1]))
    if with_example:
        ex = pick_example(word, ss, rng)
        if ex:
            ans += " For example: \"" + end_sentence(ex) + "\""
    return ans


class WordNetChats:
    def __init__(self, synsets, index, plurals, rng):
        self.synsets, self.plurals, self.rng = synsets, plurals, rng
        self.by_lemma = {}
        per_pos = {}
        for lemma, p, tagged, offsets in index:
            per_pos.setdefault(lemma, []).append((tagged, p, offsets))
        order = {"n": 0, "v": 1, "a": 2, "r": 3}
        for lemma, entries in per_pos.items():
            # the part of speech with most tagged (frequent) senses comes first
            entries.sort(key=lambda e: (-e[0], order[e[1]]))
            self.by_lemma[lemma] = {"tagged": sum(e[0] for e in entries),
                                    "senses": [(p, o) for _, p, offs in entries for o in offs]}
        self.lemmas = sorted(self.by_lemma)

    def display(self, lemma, ss):
        target = lemma.replace("_", " ")
        for w in ss.words:
            if w.lower() == target:
                return w
        return target

    def senses(self, lemma):
        return [(key, self.synsets[key]) for key in self.by_lemma[lemma]["senses"] if key in self.synsets
                and self.synsets[key].defs]

    def exchanges(self, lemma, n):
        """Up to n different exchanges about one lemma."""
        rng = self.rng
        senses = self.senses(lemma)
        if not senses:
            return []
        (p0, _), ss0 = senses[0]
        word = self.display(lemma, ss0)
        kinds = ["define"] * 3 + ["example", "syn", "ant", "kind", "pos", "multi", "plural", "spell"]
        rng.shuffle(kinds)
        kinds.insert(0, "define")
        out, used = [], set()
        for k in kinds:
            if len(out) >= n:
                break
            if k in used and k != "define":
                continue
            ex = self.make(k, lemma, word, p0, ss0, senses)
            if ex:
                used.add(k)
                out.append(ex)
        return out

    def make(self, kind, lemma, word, pos, ss, senses):
        rng = self.rng
        if kind == "define":
            qs = DEFINE_Q + (DEFINE_Q_NOUN if pos == "n" else DEFINE_Q_VERB if pos == "v" else
                             DEFINE_Q_ADJ if pos in "as" else [])
            q = fill(rng.choice(qs), word)
            # sometimes define a less frequent sense when the question names the part of speech
            return q, define_answer(word, pos, ss, rng)
        if kind == "example":
            cands = [(k, s) for k, s in senses if s.examples]
            if not cands:
                return None
            (p, _), s = cands[0]
            ex = pick_example(word, s, rng) or s.examples[0]
            a = rng.choice(EXAMPLE_A).format(e=end_sentence(ex))
            if rng.random() < 0.5:
                a += " Here \"" + word + "\" means " + end_sentence(s.defs[0])
            return fill(rng.choice(EXAMPLE_Q), word), a
        if kind == "syn":
            syns = []
            for _, s in senses[:3]:
                for w in s.words:
                    if w.lower() != word.lower() and w not in syns:
                        syns.append(w)
            if not syns:
                return None
            syns = syns[:4]
            if len(syns) == 1 or rng.random() < 0.4:
                a = f"Another word for {quote_word(word)} is {quote_word(syns[0])}."
            else:
                a = f"Words with a similar meaning to {quote_word(word)} are {join_list(syns)}."
            return fill(rng.choice(SYN_Q), word), a
        if kind == "ant":
            ants = []
            for (pf, _), s in senses[:4]:
                widx = [i + 1 for i, w in enumerate(s.words) if w.lower() == word.lower()]
                for sym, off, ppos, src, dst in s.ptrs:
                    if sym == "!" and (src in widx or src == 0):
                        t = self.synsets.get((POS_FILES_INV.get(ppos, ppos), off))
                        if t and dst >= 1 and dst <= len(t.words):
                            w = t.words[dst - 1]
                            if w not in ants:
                                ants.append(w)
            if not ants:
                return None
            return fill(rng.choice(ANT_Q), word), f"The opposite of {quote_word(word)} is {quote_word(ants[0])}."
        if kind == "kind":
            if pos != "n" or not word[:1].islower():
                return None
            hyp = [p for p in ss.ptrs if p[0] in ("@", "@i")]
            if not hyp:
                return None
            t = self.synsets.get(("n", hyp[0][1]))
            if not t or not t.defs:
                return None
            h = t.words[0]
            a = f"{cap(article(word))} {word} is a kind of {h}."
            if rng.random() < 0.5:
                a += " " + definition_sentence(h, "n", t.defs[0])
            return fill(rng.choice(KIND_Q), word), a
        if kind == "pos":
            ps = []
            for (pf, _), s in senses:
                name = POS_NAME[s.pos]
                if name not in ps:
                    ps.append(name)
            if len(ps) == 1:
                a = f"The word {quote_word(word)} is {article(ps[0])} {ps[0]}."
            else:
                a = f"The word {quote_word(word)} can be " + " or ".join(f"{article(x)} {x}" for x in ps) + "."
            return fill(rng.choice(POS_Q), word), a
        if kind == "multi":
            distinct = []
            for (pf, _), s in senses:
                if s.defs[0] not in [d for _, d in distinct]:
                    distinct.append((s.pos, s.defs[0]))
            if len(distinct) < 2:
                return None
            distinct = distinct[:4]
            lines = [f"The word {quote_word(word)} has {len(distinct)} common meanings:"]
            for i, (p, d) in enumerate(distinct, 1):
                lines.append(f"{i}. ({POS_NAME[p]}) {end_sentence(d)}")
            return fill(rng.choice(MULTI_Q), word), "\n".join(lines)
        if kind == "plural":
            if pos != "n" or lemma not in self.plurals:
                return None
            pl = self.plurals[lemma].replace("_", " ")
            return fill(rng.choice(PLURAL_Q), word), f"The plural of {quote_word(word)} is {quote_word(pl)}."
        if kind == "spell":
            if not re.fullmatch(r"[a-z]{2,12}", word):
                return None
            return fill(rng.choice(SPELL_Q), word), f"The word {quote_word(word)} is spelled " + "-".join(word) + "."
        return None


POS_FILES_INV = {"n": "n", "v": "v", "a": "a", "s": "a", "r": "r"}


# --------------------------------------------------------------------------
# Hand-written seeds (written for this project; same licence as the project)

SEEDS = [
    (["Hello", "Hello!", "Hi", "Hi!", "hi", "hello", "Hey", "Hey there!", "Good morning!", "Good evening.",
      "Hi there", "Greetings!"],
     ["Hello! How can I help you today?", "Hi! Ask me about any English word and I will explain it.",
      "Hello! I can tell you what words mean, give examples, and find synonyms.",
      "Hi there! What would you like to know?"]),
    (["Who are you?", "What are you?", "who are you", "Tell me about yourself.", "What is your name?",
      "Are you a person?", "What kind of assistant are you?"],
     ["I am a small demo language model that runs locally in Guild. I know English words: "
      "I can explain what they mean, use them in a sentence and suggest synonyms.",
      "I am Guild's small demo model, a tiny mixture-of-experts network trained on a dictionary. "
      "Ask me what a word means!",
      "I'm a small assistant that runs on your own computer. I am best at explaining English words."]),
    (["What can you do?", "How can you help me?", "What do you know?", "Help", "help", "What should I ask you?"],
     ["I can explain English words. Try asking \"What does serendipity mean?\", \"Use bright in a sentence\" "
      "or \"What is another word for happy?\".",
      "I am good at words: definitions, examples, synonyms and opposites. For example, ask me "
      "\"What is the opposite of cold?\"."]),
    (["Thank you!", "Thanks", "thanks!", "Thank you very much.", "Great, thanks.", "That helps, thank you."],
     ["You're welcome!", "You're welcome! Ask me about another word any time.", "Glad I could help!"]),
    (["Bye", "Goodbye!", "See you later.", "bye", "Good night!"],
     ["Goodbye! Have a nice day.", "Bye! Come back any time you need a word explained.", "See you!"]),
    (["How are you?", "How are you doing?", "how are you", "Are you OK?"],
     ["I'm fine, thank you! What word would you like to look up?", "I'm doing well. How can I help you?"]),
    (["Are you smart?", "Are you ChatGPT?", "Can you write code?", "What is the weather today?",
      "Can you search the web?", "What time is it?"],
     ["I am only a very small model that runs on your computer, so I can't do that. "
      "I can explain English words, though.",
      "Sorry, I can't help with that. I am a tiny model trained on a dictionary, "
      "so I am best at explaining what words mean."]),
    (["Tell me a story.", "Tell me a joke.", "Write a poem."],
     ["I am a very small model, so my stories are short: Once there was a word that nobody knew. "
      "Then someone looked it up, and now everyone uses it. The end.",
      "I am not very good at that. I am much better at explaining words. Try me!"]),
]

SYSTEM_PROMPTS = ["You are a helpful assistant.", "You are a helpful assistant that explains English words.",
                  "You are Guild's demo assistant. Answer briefly.", "Answer the user's questions about words."]


def seed_exchange(rng):
    qs, ans = rng.choice(SEEDS)
    return rng.choice(qs), rng.choice(ans)


def unknown_word_exchange(rng, known):
    while True:
        n = rng.randint(5, 10)
        w = "".join(rng.choice("bcdfghjklmnpqrstvwxz" if i % 2 == 0 else "aeiouy") for i in range(n))
        w = w[:-2] + rng.choice(["xq", "zk", "qv", "jx", "vq"])  # make it clearly non-English
        if w not in known:
            break
    q = fill(rng.choice(DEFINE_Q), w)
    a = rng.choice([f"I don't know the word {quote_word(w)}. Could you check the spelling?",
                    f"Sorry, {quote_word(w)} is not a word I know. Is it spelled correctly?"])
    return q, a


# --------------------------------------------------------------------------
# Prose

def kjv_chapters():
    try:
        txt = subprocess.run(["bible", "-l0", "Gen1:1-Rev22:21"], check=True,
                             capture_output=True, text=True).stdout
    except (OSError, subprocess.CalledProcessError) as e:
        print(f"warning: KJV skipped ({e}); install bible-kjv and bible-kjv-text", file=sys.stderr)
        return []
    chapters, title, verses = [], None, []
    for line in txt.split("\n"):
        m = re.match(r"^\s+(\d+) (.*)$", line)
        if m:
            verses.append(m.group(2).strip())
        elif line.strip():
            if title and verses:
                chapters.append((title, verses))
            title, verses = line.strip(), []
    if title and verses:
        chapters.append((title, verses))
    docs = []
    for title, vs in chapters:
        # paragraphs of ~5 verses keep lines a sensible length
        paras = [" ".join(vs[i:i + 5]) for i in range(0, len(vs), 5)]
        docs.append(title + "\n\n" + "\n\n".join(paras) + "\n")
    return docs


def fortunes_docs():
    docs = []
    for name in ("fortunes", "literature", "riddles"):
        p = os.path.join(FORTUNE_DIR, name)
        if not os.path.exists(p):
            continue
        with open(p, encoding="utf-8", errors="replace") as f:
            for chunk in f.read().split("\n%\n"):
                chunk = chunk.strip("\n%")
                if 20 < len(chunk) < 2000:
                    docs.append(chunk + "\n")
    return docs


# --------------------------------------------------------------------------

def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out-dir", default=os.path.join(HERE, "data"))
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--max-mb", type=float, default=24.0, help="cap on the corpus text size (MB of UTF-8)")
    ap.add_argument("--kjv-share", type=float, default=1.0, help="fraction of KJV chapters to include")
    ap.add_argument("--with-fortunes", action="store_true", help="also include fortunes-min (see DATA_LICENSES.md)")
    ap.add_argument("--wordnet-dir", default=WORDNET_DIR)
    args = ap.parse_args()

    rng = random.Random(args.seed)
    os.makedirs(args.out_dir, exist_ok=True)
    if not os.path.exists(os.path.join(args.wordnet_dir, "data.noun")):
        sys.exit("WordNet not found: apt-get install wordnet-base")
    synsets, index, plurals = load_wordnet(args.wordnet_dir)
    wn = WordNetChats(synsets, index, plurals, rng)
    print(f"wordnet: {len(synsets)} synsets, {len(wn.lemmas)} lemmas", file=sys.stderr)

    docs = []  # (src, text)
    budget = int(args.max_mb * 1e6)

    # prose first (fixed size), then fill the rest with chats
    prose = [("kjv", d) for d in kjv_chapters()]
    rng.shuffle(prose)
    prose = prose[:int(len(prose) * args.kjv_share)]
    if args.with_fortunes:
        prose += [("fortunes", d) for d in fortunes_docs()]
    docs.extend(prose)
    used = sum(len(t.encode()) for _, t in docs)

    # lemma tiers: frequent (tagged in SemCor) > single words > multi-word expressions
    tier1 = [l for l in wn.lemmas if wn.by_lemma[l]["tagged"] > 0]
    tier2 = [l for l in wn.lemmas if wn.by_lemma[l]["tagged"] == 0 and "_" not in l and "-" not in l]
    tier3 = [l for l in wn.lemmas if wn.by_lemma[l]["tagged"] == 0 and ("_" in l or "-" in l)]
    for t in (tier1, tier2, tier3):
        rng.shuffle(t)
    plan = [(l, 4) for l in tier1] + [(l, 2) for l in tier1] + [(l, 2) for l in tier2] + [(l, 1) for l in tier3]
    # second pass on tier1 gives new random templates for common words

    known = set(wn.lemmas)
    n_conv = 0

    def flush_conversation(exchanges):
        nonlocal used, n_conv
        msgs = []
        if rng.random() < 0.08:
            msgs.append({"role": "system", "content": rng.choice(SYSTEM_PROMPTS)})
        if rng.random() < 0.05:
            q, a = seed_exchange(rng)
            msgs += [{"role": "user", "content": q}, {"role": "assistant", "content": a}]
        for q, a in exchanges:
            msgs += [{"role": "user", "content": q}, {"role": "assistant", "content": a}]
        text = render_chat(msgs, add_generation_prompt=False)
        docs.append(("wordnet", text))
        used += len(text.encode())
        n_conv += 1

    # collect exchanges until the byte budget is reached (estimated with the
    # chat markup, ~60 bytes per exchange), then shuffle them globally and group
    # 1..3 random exchanges into one conversation
    exchanges, est = [], used
    for lemma, n in plan:
        if est >= budget:
            break
        for ex in wn.exchanges(lemma, n):
            exchanges.append(ex)
            est += len(ex[0]) + len(ex[1]) + 60
        if rng.random() < 0.02:
            exchanges.append(unknown_word_exchange(rng, known))
        if rng.random() < 0.03:
            exchanges.append(seed_exchange(rng))
    # the hand-written seeds must be learned well: make sure each appears many times
    exchanges += [seed_exchange(rng) for _ in range(4000)]
    rng.shuffle(exchanges)
    i = 0
    while i < len(exchanges):
        k = rng.choice([1, 1, 1, 2, 2, 3])
        flush_conversation(exchanges[i:i + k])
        i += k

    rng.shuffle(docs)
    path = os.path.join(args.out_dir, "corpus.jsonl")
    stats = {}
    with open(path, "w", encoding="utf-8") as f:
        for src, text in docs:
            f.write(json.dumps({"src": src, "text": text}, ensure_ascii=False) + "\n")
            s = stats.setdefault(src, {"docs": 0, "bytes": 0})
            s["docs"] += 1
            s["bytes"] += len(text.encode())
    total = sum(s["bytes"] for s in stats.values())
    summary = {"total_bytes": total, "conversations": n_conv, "sources": stats, "seed": args.seed,
               "max_mb": args.max_mb, "with_fortunes": args.with_fortunes}
    with open(os.path.join(args.out_dir, "corpus_stats.json"), "w") as f:
        json.dump(summary, f, indent=1)
    print(json.dumps(summary), file=sys.stderr)
    print(f"wrote {path} ({os.path.getsize(path) / 1e6:.1f} MB)", file=sys.stderr)


if __name__ == "__main__":
    main()
