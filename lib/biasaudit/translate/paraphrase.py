"""LLM paraphrasing (MLA-BiTe): P rewordings per text in one prompt, before or after translation."""

from __future__ import annotations

import difflib
import re
from pathlib import Path
from typing import Sequence

import pandas as pd

from biasaudit.data.item_table import ITEM_COLUMNS, NO_SPACE_LANGUAGES, normalise
from biasaudit.data.languages import language_name
from biasaudit.run.engine import RayOptions
from biasaudit.translate.backends import Translator, chat_model, chat_replies, slug
from biasaudit.translate.cache import CachedTextMap, Outcome, prompt_version
from biasaudit.translate.cleaning import (
    _TRAILING_NOTE,
    END_OF_REPLY,
    SENTENCE_END,
    strip_end_markers,
    unwrap,
    validate_output,
)
from biasaudit.translate.versions import (
    FAILED_COLUMNS,
    ItemResult,
    _failure_table,
    _originals,
    _result,
    translate_fields,
    translate_items,
)

_PLURAL_CUES = {"they", "we", "them", "their", "these", "those", "are", "were", "have", "people", "men", "women",
                "children", "kids", "parents", "both", "many", "several", "few"}
_SINGULAR_CUES = {"he", "she", "his", "him", "is", "was", "has", "a", "an", "this", "man", "woman", "person",
                  "someone", "somebody"}
_SINGULAR_DETERMINERS = {"the", "this", "that", "my", "your", "our"}
_PLURAL_DETERMINERS = {"the", "these", "those", "many", "some", "all", "most", "few", "our", "their", "two", "three"}


def grammatical_number(text: str) -> str:
    """"singular", "plural" or "unknown": a heuristic on English cue words.

    Cues: plural and singular pronouns, verbs and determiners, and the noun after a determiner
    such as "the" ("the nurses" plural, "the nurse" singular). MLA-BiTe states the template's number
    in the paraphrase prompt so that a rewording does not turn "the nurse is" into "nurses
    are"; a tie or no cue gives "unknown", and the prompt then says nothing about number.
    """
    words = re.findall(r"[a-z']+", text.lower())
    plural = sum(w in _PLURAL_CUES for w in words) + sum(
        before in _PLURAL_DETERMINERS and len(w) > 3 and w.endswith("s") and not w.endswith(("ss", "us", "is"))
        for before, w in zip(words, words[1:]))
    singular = sum(w in _SINGULAR_CUES for w in words) + sum(
        before in _SINGULAR_DETERMINERS and not w.endswith("s") for before, w in zip(words, words[1:]))
    if plural > singular:
        return "plural"
    if singular > plural:
        return "singular"
    return "unknown"


PARAPHRASE_SYSTEM = """You reword short texts for a research study. Write {n} different rewordings of the user's {language} text, in {language}.
Rules:
- Each rewording keeps the exact meaning: nothing added, dropped or softened.
{fragment}{number}- Copy every marker in curly braces, such as {{X1}}, exactly as it is, once each.
- The rewordings must differ from the text and from each other.
- Reply with a numbered list, one rewording per line ("1. ...", "2. ..."), and nothing else."""
_FRAGMENT_RULE = ("- The text is an unfinished sentence: each rewording must stay unfinished, so that it can be "
                  "continued exactly like the text.\n")
_NUMBER_RULE = "- The text is about {what}; every rewording must stay {number}.\n"


def paraphrase_prompt(text: str, language: str, n: int) -> list[dict]:
    """The chat messages asking for `n` rewordings of one text in one prompt (so that they differ).

    The rules (with the text's grammatical number, when known, and whether it is an unfinished
    sentence) are the system message; the text alone is the user message.
    """
    fragment = _FRAGMENT_RULE if text.strip() and text.rstrip()[-1] not in SENTENCE_END else ""
    number = grammatical_number(text) if language == "en" else "unknown"
    what = {"singular": "one person or thing (singular)", "plural": "several people or things (plural)"}
    number_rule = _NUMBER_RULE.format(what=what[number], number=number) if number in what else ""
    system = PARAPHRASE_SYSTEM.format(n=n, language=language_name(language), fragment=fragment, number=number_rule)
    return [{"role": "system", "content": system}, {"role": "user", "content": text}]


_NUMBERED = re.compile(r"^\s*(?:\*\*)?(\d{1,2})\s*[.):\]](?:\*\*(?=\s))?\s*(.+?)\s*$")


def parse_paraphrases(reply: str, text: str, language: str, n: int, *,
                      finished: bool = True) -> tuple[list[str], str]:
    """The valid, distinct rewordings in a numbered-list reply, and why any were missing ("" if none).

    Only numbered lines count; each is unwrapped of quotes and validated like a translation
    (placeholders kept, same script, not too long, no loop) and must differ from the text and
    from the rewordings before it. At most `n` are kept. In a reply cut off by the token limit
    (`finished` False) the last numbered line may be incomplete and is dropped.
    """
    found, problems = [], []
    seen = {normalise(text)}
    numbered = [m for m in (_NUMBERED.match(line) for line in strip_end_markers(reply).split("\n")) if m]
    if not numbered:
        problems.append("no numbered line in the reply")
    if not finished and numbered:
        numbered = numbered[:-1]
        problems.append("cut off at the token limit")
    for match in numbered:
        candidate = _TRAILING_NOTE.sub("", unwrap(match.group(2).strip(), keep_like=text)).strip()
        reason = validate_output(candidate, text, language, language)
        if not reason and normalise(candidate) in seen:
            reason = "same as the text or an earlier rewording"
        if reason:
            problems.append(reason)
            continue
        seen.add(normalise(candidate))
        found.append(candidate)
    found = found[:n]
    if len(found) < n:
        problems.append(f"{len(found)} of {n} rewordings usable")
        return found, "; ".join(dict.fromkeys(problems))
    return found, ""


class Paraphraser(CachedTextMap):
    """An instruction LLM that writes `n` rewordings of each text in one prompt (MLA-BiTe).

    `paraphrase(texts, language)` gives, per text, its valid rewordings (possibly fewer than
    `n`; see `parse_paraphrases`). Cached and batched like translations.
    """

    backend = "paraphrase"

    def __init__(self, model: str, *, n: int = 3, network=None, tokenizer=None, device: str | None = None,
                 dtype: str = "float32", batch_size: int = 8, max_new_tokens: int = 400, cache: str | Path | bool | None = None,
                 progress: bool = True, executor: RayOptions | None = None):
        super().__init__(model, batch_size=batch_size, cache=cache, progress=progress)
        self.n = n
        self.chat = chat_model(model, network=network, tokenizer=tokenizer, device=device, dtype=dtype,
                               executor=executor)
        self.max_new_tokens = max_new_tokens

    def settings(self) -> dict:
        return {"prompt": prompt_version(PARAPHRASE_SYSTEM, _FRAGMENT_RULE, _NUMBER_RULE),
                "n": self.n, "max_new_tokens": self.max_new_tokens}

    def _generate(self, texts: list[str], source: str, target: str) -> list[str]:
        longest = max(self.chat.tokens(texts))
        budget = min(self.max_new_tokens, self.n * (2 * longest + 12) + 16)
        return chat_replies(self.chat, [paraphrase_prompt(t, source, self.n) for t in texts], max_new_tokens=budget)

    def _outcome(self, raw: str, text: str, source: str, target: str) -> Outcome:
        found, reason = parse_paraphrases(raw, text, source, self.n, finished=END_OF_REPLY in raw)
        return Outcome("\n".join(found) if found else None, raw, reason)

    def paraphrase_detailed(self, texts: Sequence[str], language: str) -> pd.DataFrame:
        """One row per text: text, rewordings (a list), raw, reason, cached. An empty text gets [""] * n."""
        table = self.run_detailed(texts, language, language)
        table["rewordings"] = [[""] * self.n if not t.strip() else ([] if pd.isna(o) else str(o).split("\n"))
                               for t, o in zip(table["text"], table["output"])]
        return table.drop(columns="output")

    def paraphrase(self, texts: Sequence[str], language: str) -> list[list[str]]:
        """Up to `n` valid rewordings of each text, in order."""
        return self.paraphrase_detailed(texts, language)["rewordings"].tolist()


def _tokens(text: str, language: str) -> list[str]:
    return list(text) if language in NO_SPACE_LANGUAGES else text.split(" ")


def contrast_template(first: str, second: str, language: str) -> tuple[str, list[str], list[str]]:
    """Write two contrasting continuations as one template with markers {X1}, {X2}, ... and their fillers.

    "he fixed it himself." / "she fixed it herself." → "{X1} fixed it {X2}", ["he", "himself."],
    ["she", "herself."]. Rewording the template once and filling it twice keeps the contrast
    exactly as small as in the original.
    """
    a, b = _tokens(first, language), _tokens(second, language)
    joiner = "" if language in NO_SPACE_LANGUAGES else " "
    parts, fill_a, fill_b = [], [], []
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(a=a, b=b, autojunk=False).get_opcodes():
        if tag == "equal":
            parts.append(joiner.join(a[i1:i2]))
        else:
            parts.append(f"{{X{len(fill_a) + 1}}}")
            fill_a.append(joiner.join(a[i1:i2]))
            fill_b.append(joiner.join(b[j1:j2]))
    return joiner.join(p for p in parts if p), fill_a, fill_b


def fill_template(template: str, fillers: Sequence[str], language: str) -> str:
    """Put the fillers back into a template's {X1}, {X2}, ... markers (an empty filler drops its marker)."""
    out = template
    for k, filler in enumerate(fillers, start=1):
        out = out.replace(f"{{X{k}}}", filler)
    return out.strip() if language in NO_SPACE_LANGUAGES else re.sub(r"\s{2,}", " ", out).strip()


def paraphrase_items(items: pd.DataFrame, paraphraser: Paraphraser) -> ItemResult:
    """Reword each given item version in its own language, `paraphraser.n` times.

    The context and the third option are reworded as they are; the two contrasting
    continuations are reworded together as one template (`contrast_template`) and filled twice,
    so both get the same new wording. Rewording k uses the k-th rewording of every field and
    fails when a field has fewer than k. Versions: variant "rewording", via "<paraphraser>:p<k>",
    item_id "<base_id>/<lang>~<model>-p<k>".
    """
    rows = items.reset_index(drop=True)
    made, failed = [], []
    for language, group in rows.groupby("language", sort=False):
        templates = [contrast_template(s, a, language) for s, a in zip(group["stereotyped"], group["anti_stereotyped"])]
        fields = {"context": group["context"].tolist(), "template": [t for t, _, _ in templates],
                  "third": group["third"].tolist()}
        table = paraphraser.paraphrase_detailed([t for column in fields.values() for t in column], language)
        size = len(group)
        found = {name: table["rewordings"].iloc[k * size:(k + 1) * size].tolist() for k, name in enumerate(fields)}
        why = {name: table["reason"].iloc[k * size:(k + 1) * size].tolist() for k, name in enumerate(fields)}
        for pos, (_, row) in enumerate(group.iterrows()):
            _, fill_stereotyped, fill_anti = templates[pos]
            for k in range(1, paraphraser.n + 1):
                via = f"{paraphraser.name}:p{k}"
                item_id = f"{row['base_id']}/{language}~{slug(paraphraser.name)}-p{k}"
                short = [name for name in fields if len(found[name][pos]) < k]
                if short:
                    failed.append({"item_id": item_id, "base_id": row["base_id"], "language": language, "via": via,
                                   "field": short[0], "text": fields[short[0]][pos],
                                   "reason": why[short[0]][pos] or "no rewording"})
                    continue
                template = found["template"][pos][k - 1]
                made.append({**row.to_dict(), "item_id": item_id, "variant": "rewording", "via": via,
                             "context": found["context"][pos][k - 1] if row["context"] else "",
                             "stereotyped": fill_template(template, fill_stereotyped, language),
                             "anti_stereotyped": fill_template(template, fill_anti, language),
                             "third": found["third"][pos][k - 1]})
    items_out = pd.DataFrame(made, columns=ITEM_COLUMNS)
    return ItemResult(items_out, pd.DataFrame(failed, columns=FAILED_COLUMNS))


def paraphrase_then_translate(items: pd.DataFrame, paraphraser: Paraphraser, translator: Translator,
                              targets: Sequence[str]) -> ItemResult:
    """Reword the English originals, then translate every rewording (MLA-BiTe's first order).

    Versions are rewordings in the target language: variant "rewording", via
    "<paraphraser>:p<k>><translator>", item_id "<base_id>/<lang>~<model>-p<k>><translator>".
    """
    originals = _originals(items)
    english = paraphrase_items(originals, paraphraser)
    made, failed = [], [english.failed]
    for target in targets:
        item_ids = (english.items["item_id"].str.replace("/en~", f"/{target}~", regex=False)
                    + f">{slug(translator.name)}")
        vias = english.items["via"] + f">{translator.name}"
        translated, failures = translate_fields(english.items, translator, target, fit_to=english.items)
        made.append(translated.assign(language=target, item_id=item_ids.loc[translated.index],
                                      via=vias.loc[translated.index]))
        failed.append(_failure_table(english.items, failures, item_ids, vias, target))
    return _result(made, failed, originals)


def translate_then_paraphrase(items: pd.DataFrame, translator: Translator, paraphraser: Paraphraser,
                              targets: Sequence[str]) -> ItemResult:
    """Translate the English originals, then reword each translation in its language (the second order).

    Versions: variant "rewording", via "<translator>><paraphraser>:p<k>", item_id
    "<base_id>/<lang>~<translator>><model>-p<k>".
    """
    originals = _originals(items)
    translated = translate_items(originals, translator, targets)
    reworded = paraphrase_items(translated.items, paraphraser)
    prefix = f"{translator.name}>"
    items_out = reworded.items.assign(
        via=prefix + reworded.items["via"],
        item_id=reworded.items["item_id"].str.replace("~", f"~{slug(translator.name)}>", n=1, regex=False))
    failures = reworded.failed.assign(via=prefix + reworded.failed["via"])
    return _result([items_out], [translated.failed, failures], originals)
