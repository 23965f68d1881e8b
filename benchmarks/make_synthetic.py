"""A synthetic dataset shaped like RAG-Dataset-12000 (context, question, answer; one article per row), from the
bundled articles, for scale benchmarks. Not for quality claims: the questions are templated.

How: every sentence of every bundled article (pySBD) becomes the answer to questions built from its content words
with 20 templates ("What does the article say about X and Y?", "Which passage mentions X?", ...), X and Y drawn
(seeded) from the sentence's longer content words; the bundled examples' own questions are added as written.
Rows are drawn without replacement from that pool (about 15,500 distinct questions) and written as parquet, with a
`relation` column: the bundled questions keep their gold relation, the templated ones are direct matching (each asks
for what one sentence says).

With --distinct-articles every templated row gets an article of its own, as in RAG-Dataset-12000: its source article
with one paragraph that does not hold the answer dropped and one paragraph of another article inserted (seeded).
Each article is then segmented and indexed on its own, but its sentences, and most of its chunks (the splitter cuts
at paragraph breaks first), repeat other rows': the model work per row is well below the real dataset's, whose
texts are all distinct, so cold times measured on these rows understate real ones.

    python benchmarks/make_synthetic.py --rows 12000 --out synthetic-12000.parquet
    python benchmarks/make_synthetic.py --rows 2400 --distinct-articles --out synthetic-2400.parquet
"""
from __future__ import annotations

import argparse
import random
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

TEMPLATES = [
    "What does the article say about {a} and {b}?", "Which passage mentions {a}?", "How is {a} connected to {b}?",
    "What happened with {a}?", "Why is {a} mentioned together with {b}?", "Where does the text discuss {a}?",
    "What do we learn about {b} from the part on {a}?", "Summarise what is said about {a}.",
    "According to the article, what is true of {a}?", "In what context does {b} appear?",
    "What detail is given about {a} and {b}?", "Explain the role of {a}.", "What is reported regarding {b}?",
    "Which facts about {a} does the article give?", "What links {b} and {a}?", "Tell me about {a}.",
    "What changed regarding {a}?", "Who or what was involved with {b}?", "Is {a} related to {b}, and how?",
    "What does the text state about {b}?",
]


def variant(context: str, answer: str, paragraphs: list[str], rng: random.Random) -> str:
    """The article with one paragraph not holding the answer swapped out for a paragraph from elsewhere."""
    own = context.split("\n\n")
    droppable = [i for i, p in enumerate(own) if answer not in p]
    if droppable:
        del own[rng.choice(droppable)]
    foreign = rng.choice([p for p in paragraphs if p not in own])
    own.insert(rng.randrange(len(own) + 1), foreign)
    return "\n\n".join(own)


def generate(rows: int, seed: int = 0, distinct_articles: bool = False):
    import pandas as pd

    from opi.data import load_examples
    from opi.schemas import DatasetConfig
    from opi.diagnostics import content_words
    from opi.sentences import split_sentences

    examples, _ = load_examples(DatasetConfig(kind="bundled"))
    rng = random.Random(seed)
    pool = [(e.context, e.question, e.answer, e.relation) for e in examples]
    for context in dict.fromkeys(e.context for e in examples):
        for sentence in split_sentences(context):
            words = sorted((w for w in content_words(sentence.text) if len(w) > 3 and w.isalpha()),
                           key=lambda w: (len(w), w))[-6:]  # ties by spelling: sets have no stable order
            if len(words) < 2:
                continue
            for template in TEMPLATES:
                a, b = rng.sample(words, 2)
                pool.append((context, template.format(a=a, b=b), sentence.text, "direct_matching"))
    pool = list(dict.fromkeys(pool))
    if rows > len(pool):
        raise SystemExit(f"only {len(pool)} distinct rows can be made; ask for fewer")
    chosen = rng.sample(pool, rows)
    if distinct_articles:
        paragraphs = list(dict.fromkeys(p for e in examples for p in e.context.split("\n\n")))
        bundled, seen, varied = {e.question for e in examples}, set(), []
        for context, question, answer, relation in chosen:
            while question not in bundled and context in seen:
                context = variant(context, answer, paragraphs, rng)
            seen.add(context)
            varied.append((context, question, answer, relation))
        chosen = varied
    return pd.DataFrame(chosen, columns=["context", "question", "answer", "relation"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=12000)
    parser.add_argument("--out", type=Path, default=Path("synthetic-12000.parquet"))
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--distinct-articles", action="store_true", help="an article of its own for every row")
    args = parser.parse_args()
    frame = generate(args.rows, args.seed, args.distinct_articles)
    frame.to_parquet(args.out, index=False)
    print(f"{args.out}: {len(frame)} rows, {frame['context'].nunique()} articles, "
          f"{frame['question'].nunique()} distinct questions, {frame['answer'].nunique()} distinct answers")


if __name__ == "__main__":
    main()
