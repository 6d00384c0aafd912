"""Real float embeddings made on this machine: fastText sentence vectors of the text under /usr/share/doc.

  1. corpus: every regular file under /usr/share/doc that is text (gzip ones unpacked; a file with a
     NUL byte in its first 8 KiB is skipped), in sorted path order, lowercased, every run of
     characters that are not letters or digits turned into one space; lines of at least 3 words,
     each kept once (first occurrence), form the training text.
  2. fastText skipgram (Debian's `fasttext`) on that text: -dim D, -epoch E, word vectors only
     (-maxn 0: subword buckets would take 2M x D floats), other options fastText's defaults.
  3. rows: distinct lines of at least 5 words in a seeded random order, embedded with
     `fasttext print-sentence-vectors` (the mean of the unit-length word vectors), written to 5
     significant digits as fastText prints them; the first N distinct vectors are kept, in that order.
The output .npy (float32, N x D) and a .txt beside it with the sentence of each row. See data/README.md.

With --words, steps 1 and 2 are the same and the rows are the word vectors themselves (fastText's
.vec, 5 significant digits) of the N most frequent words, in a seeded random order, the .txt holding
the word of each row. --float16 stores the rows as float16 (half the bytes; what both tools read).
"""
import argparse
import gzip
import hashlib
import os
import re
import subprocess
import sys
import tempfile

import numpy as np

import fashion_mnist

SOURCE = "/usr/share/doc"
DEFAULT_OUT = os.path.join(fashion_mnist.DEFAULT_OUT, "docs-embeddings-384.npy")
NOT_WORD = re.compile(r"[\W_]+")
TRAIN_MIN_WORDS = 3
ROW_MIN_WORDS = 5
# Lines embedded beyond N, so that N distinct vectors remain after lines whose words fastText does
# not know (fewer than 5 occurrences) collapse onto the same vector.
SPARE = 0.1


def text_lines(root):
    """Every line of every text file under root, normalised, in sorted path order."""
    paths = []
    for folder, dirs, files in os.walk(root):
        dirs.sort()
        paths += [os.path.join(folder, f) for f in files]
    for path in sorted(paths):
        if os.path.islink(path) or not os.path.isfile(path):
            continue
        with open(path, "rb") as f:
            raw = f.read()
        if path.endswith(".gz"):
            try:
                raw = gzip.decompress(raw)
            except (OSError, EOFError):
                continue
        if b"\0" in raw[:8192]:
            continue
        for line in raw.decode("utf-8", errors="ignore").lower().splitlines():
            words = NOT_WORD.sub(" ", line).split()
            if words:
                yield words


def distinct_lines(root):
    seen = set()
    for words in text_lines(root):
        line = " ".join(words)
        if len(words) >= TRAIN_MIN_WORDS and line not in seen:
            seen.add(line)
            yield line


def embed(model, lines, dim):
    """fastText's sentence vectors of lines, one row each."""
    done = subprocess.run(["fasttext", "print-sentence-vectors", model], input="\n".join(lines) + "\n",
                          capture_output=True, text=True, check=True)
    rows = done.stdout.splitlines()
    if len(rows) != len(lines):
        sys.exit(f"fasttext print-sentence-vectors gave {len(rows)} rows for {len(lines)} lines")
    x = np.array([np.array(row.split(), dtype=np.float32) for row in rows])
    if x.shape != (len(lines), dim):
        sys.exit(f"fasttext print-sentence-vectors gave {x.shape}, expected ({len(lines)}, {dim})")
    return x


def word_vectors(vec_path, dim):
    """The words of fastText's .vec in its order (most frequent first) and their vectors; fastText's
    end-of-line token </s> is not a word of the text and is left out."""
    words, rows = [], []
    with open(vec_path, encoding="utf-8") as f:
        count, width = (int(v) for v in f.readline().split())
        if width != dim:
            sys.exit(f"{vec_path}: vectors of dimension {width}, expected {dim}")
        for number, line in enumerate(f, start=2):
            fields = line.rstrip(" \n").split(" ")
            if len(fields) != dim + 1:
                sys.exit(f"{vec_path}: line {number} has {len(fields) - 1} values, expected {dim}")
            if fields[0] == "</s>":
                continue
            words.append(fields[0])
            rows.append(np.array(fields[1:], dtype=np.float32))
    if len(rows) + 1 < count:
        sys.exit(f"{vec_path}: {len(rows)} word vectors, the header says {count}")
    return words, np.array(rows)


def main():
    parser = argparse.ArgumentParser(prog="scripts/embeddings", description=__doc__.splitlines()[0])
    parser.add_argument("out", nargs="?", default=DEFAULT_OUT, help=f"the .npy to write (default: {DEFAULT_OUT})")
    parser.add_argument("--rows", type=int, default=200_000, help="N, the rows to write (default 200000)")
    parser.add_argument("--dim", type=int, default=384, help="D, the embedding dimension (default 384)")
    parser.add_argument("--epochs", type=int, default=2, help="fastText training epochs (default 2)")
    parser.add_argument("--threads", type=int, default=2,
                        help="fastText threads (default 2); only 1 gives the same bytes on every run")
    parser.add_argument("--seed", type=int, default=1, help="seeds the order of the rows (default 1)")
    parser.add_argument("--words", action="store_true",
                        help="rows are the word vectors of the N most frequent words, not sentence vectors")
    parser.add_argument("--float16", action="store_true", help="write the rows as float16")
    args = parser.parse_args()
    for name in ("rows", "dim", "epochs", "threads"):
        if getattr(args, name) < 1:
            parser.error(f"--{name} must be at least 1, got {getattr(args, name)}")
    if subprocess.run(["sh", "-c", "command -v fasttext"], capture_output=True).returncode != 0:
        print("install Debian's fasttext (scripts/setup --bench does)", file=sys.stderr)
        return 1

    with tempfile.TemporaryDirectory() as work:
        corpus = os.path.join(work, "corpus.txt")
        candidates, words = [], 0
        digest = hashlib.sha256()
        with open(corpus, "w", encoding="utf-8") as f:
            for line in distinct_lines(SOURCE):
                f.write(line + "\n")
                digest.update(line.encode() + b"\n")
                count = line.count(" ") + 1
                words += count
                if count >= ROW_MIN_WORDS:
                    candidates.append(line)
        print(f"corpus: {words} words in distinct lines, SHA-256 {digest.hexdigest()}; "
              f"{len(candidates)} lines of >= {ROW_MIN_WORDS} words", file=sys.stderr)
        wanted = args.rows if args.words else int(args.rows * (1 + SPARE))
        if not args.words and len(candidates) < wanted:
            sys.exit(f"{SOURCE} has {len(candidates)} distinct lines of >= {ROW_MIN_WORDS} words; "
                     f"{wanted} are needed for {args.rows} rows")

        model = os.path.join(work, "model")
        subprocess.run(["fasttext", "skipgram", "-input", corpus, "-output", model, "-dim", str(args.dim),
                        "-epoch", str(args.epochs), "-maxn", "0", "-thread", str(args.threads), "-verbose", "1"],
                       check=True)
        if args.words:
            vocabulary, vectors = word_vectors(model + ".vec", args.dim)
            print(f"vocabulary: {len(vocabulary)} words", file=sys.stderr)
            if len(vocabulary) < wanted:
                sys.exit(f"the vocabulary has {len(vocabulary)} words; {wanted} are needed")
            order = np.random.default_rng(args.seed).permutation(wanted)
            lines = [vocabulary[i] for i in order]
            x = vectors[order]
        else:
            order = np.random.default_rng(args.seed).permutation(len(candidates))[:wanted]
            lines = [candidates[i] for i in order]
            x = embed(model + ".bin", lines, args.dim)

    if args.float16:
        x = x.astype(np.float16)
    _, first = np.unique(x, axis=0, return_index=True)
    keep = np.sort(first)
    if len(keep) < args.rows:
        sys.exit(f"only {len(keep)} distinct vectors among {len(lines)} lines; {args.rows} are needed")
    keep = keep[:args.rows]
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    fashion_mnist.write_npy(args.out, x[keep], "<f2" if args.float16 else "<f4")

    def write_text(temporary):
        with open(temporary, "w", encoding="utf-8") as f:
            f.writelines(lines[i] + "\n" for i in keep)
    fashion_mnist.replace(os.path.splitext(args.out)[0] + ".txt", write_text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
