#!/usr/bin/env python3
"""Writes Sources/WebAuthnCore/Model/UserName+Skeleton.swift, the table behind
UserName.lookalikeKey, from UTS #39's confusables.txt and this project's additions.

Run from the package root: python3 TestVectors/unicode/generate.py

The key of a name is its NFKD form, capitals that need it folded (below), lowercased,
decomposed (NFD), with every scalar replaced by its image in the table. A name's key must not change with its case,
so the table is the equivalence that confusables.txt and lowercasing make together:
`I` looks like `l` and is `i` in another case, so `i`, `l` and `I` have one image.
Each pair `c → p` of the data, both sides put through the same steps as a name
(NFKC, lowercase, NFD), joins the classes of two scalars, or gives a scalar's class
a sequence (`m → rn`). A class's image is its smallest scalar, or its sequence.

A character whose NFKC form differs from it (`ſ`, `ﬁ`, mathematical letters) cannot
be in a name (UserName.normalize refuses it, as PRECIS's IdentifierClass does), so
its pair is left out: `ſ → f` would otherwise make `s` and `f` one letter.
"""
import sys
import unicodedata

ROOT = "TestVectors/unicode"
OUT = "Sources/WebAuthnCore/Model/UserName+Skeleton.swift"


def parse(path):
    pairs = []
    with open(path, encoding="utf-8-sig") as f:
        for line in f:
            line = line.split("#", 1)[0].strip()
            if not line:
                continue
            fields = [x.strip() for x in line.split(";")]
            source = "".join(chr(int(h, 16)) for h in fields[0].split())
            target = "".join(chr(int(h, 16)) for h in fields[1].split())
            pairs.append((source, target))
    return pairs


def as_name(s):
    """The steps a name goes through before the tables: NFKD, lowercase, NFD."""
    return unicodedata.normalize("NFD", unicodedata.normalize("NFKD", s).lower())


def has_compat(s):
    return unicodedata.normalize("NFKC", s) != unicodedata.normalize("NFC", s)


def is_ascii_alnum(s):
    return s.isascii() and s.isalnum()


def hexes(s):
    return ",".join("%X" % ord(x) for x in s)


def main():
    pairs = [p for p in parse(f"{ROOT}/confusables.txt") + parse(f"{ROOT}/additions.txt") if not has_compat(p[0])]
    # Small letters and caseless characters first; capitals after, as they may join classes.
    small = [(c, p) for c, p in pairs if unicodedata.normalize("NFKD", c).lower() == unicodedata.normalize("NFKD", c)]
    capitals = [(c, p) for c, p in pairs if (c, p) not in set(small)]

    parent, members, expansions = {}, {}, {}

    def find(x):
        parent.setdefault(x, x)
        members.setdefault(x, {x})
        while parent[x] != x:
            x = parent[x]
        return x

    def rank(x):  # a class's image is its ASCII small letter, digit or other ASCII, else its smallest scalar
        return (not (x.isascii() and x.islower()), not (x.isascii() and x.isdigit()), not x.isascii(), x)

    def union(a, b):
        ra, rb = find(a), find(b)
        if ra == rb:
            return
        root, other = sorted([ra, rb], key=rank)
        parent[other] = root
        members[root] |= members.pop(other)
        if other in expansions:
            expansions.setdefault(root, []).extend(expansions.pop(other))

    def joins_two_alphabets(a, b):
        """Whether joining a's and b's classes would make two ASCII letters or digits one."""
        ra, rb = find(a), find(b)
        left = {m for m in members[ra] if is_ascii_alnum(m)} | ({"*"} if ra in expansions else set())
        right = {m for m in members[rb] if is_ascii_alnum(m)} | ({"*"} if rb in expansions else set())
        return ra != rb and bool(left) and bool(right)

    def join(a, b):
        if len(a) == 1 and len(b) == 1:
            union(a, b)
        elif len(a) == 1:
            expansions.setdefault(find(a), []).append(b)
        elif len(b) == 1:
            expansions.setdefault(find(b), []).append(a)
        elif len(a) == len(b):
            for x, y in zip(a, b):
                if x != y:
                    union(x, y)
        else:
            return False
        return True

    skipped = []
    for c, p in small:
        if not join(as_name(c), as_name(p)):
            skipped.append((c, p))

    # A capital whose small letter looks like another letter than the capital's look-alike does
    # (Greek `Υ` like `Y`, `υ` like `u`) is folded before lowercasing, unless it is ASCII (`I` like
    # `l`: `i`, `I` and `l` are one letter).
    caps = {}
    for c, p in capitals:
        a, b = as_name(c), as_name(p)
        if a == b:
            continue
        positions = [(x, y) for x, y in zip(a, b) if x != y] if len(a) == len(b) else []
        if c.isascii() or (positions and not any(joins_two_alphabets(x, y) for x, y in positions)):
            if not join(a, b):
                skipped.append((c, p))
        elif len(unicodedata.normalize("NFD", c)) == 1:
            caps[c] = b
        else:
            skipped.append((c, p))

    images = {}

    def image(scalar, depth=0):
        root = find(scalar)
        if root in images:
            return images[root] or root
        result = root
        images[root] = None  # a sequence that holds the class itself is no image of it (`η → n̩` once `η` is `n`)
        for sequence in sorted(set(expansions.get(root, [])), key=lambda s: (len(s), s)):
            if depth < 8 and all(find(x) != root and images.get(find(x), "") is not None for x in sequence):
                result = unicodedata.normalize("NFD", "".join(image(x, depth + 1) for x in sequence))
                break
        images[root] = result
        return result

    def skeleton(text):
        return unicodedata.normalize("NFD", "".join(image(x) for x in text))

    table = {}
    for s in sorted(set(parent) | set(expansions)):
        if image(s) != s:
            table[s] = image(s)
    caps = {c: skeleton(b) for c, b in caps.items()}

    # The tables must be a fixed point: an image maps to itself.
    for s, img in list(table.items()) + list(caps.items()):
        if skeleton(img) != img:
            sys.exit(f"not a fixed point: U+{ord(s):04X} -> {img!r} -> {skeleton(img)!r}")

    def literal(name, doc, entries):
        text = ";".join("%X=%s" % (ord(s), hexes(img)) for s, img in sorted(entries.items()))
        out = [f"    /// {doc} ({len(entries)} entries, `hex=hex,hex;`).\n", f'    static let {name} = """\n']
        chunks = [text[i : i + 150] for i in range(0, len(text), 150)]
        out += [f"        {chunk}\\\n" for chunk in chunks[:-1]] + [f"        {chunks[-1]}\n"]
        return out + ['        """\n']

    with open(OUT, "w", encoding="utf-8") as f:
        f.write("// Generated by TestVectors/unicode/generate.py from UTS #39 confusables.txt (Unicode 13.0.0)\n")
        f.write("// and TestVectors/unicode/additions.txt: do not edit. See TestVectors/unicode/PROVENANCE.md.\n")
        f.write("// Changing these tables changes account keys: add a store migration that recomputes them.\n")
        f.write("extension UserName {\n")
        f.writelines(literal("capitalData", "Capitals folded before lowercasing, to their look-alike's key", caps))
        f.write("\n")
        f.writelines(literal("skeletonData", "The image of each scalar of a lowercased, decomposed name", table))
        f.write("}\n")
    print(f"{len(pairs)} pairs: {len(table)} images, {len(caps)} capitals, {len(skipped)} skipped")
    for c, p in skipped:
        print("  skipped", hexes(c), "->", hexes(p))
    for x in "abcdefghijklmnopqrstuvwxyz0123456789":
        if image(x) != x:
            print(f"  {x} -> {image(x)!r}")


if __name__ == "__main__":
    main()
