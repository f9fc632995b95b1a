"""Chapter 30: LangBiTe's template tests by language: do chat models answer bias questions the same
way in every language, and is a language's lower pass rate more than rewording alone produces?"""

from __future__ import annotations

import pandas as pd
from IPython.display import Markdown

from biasaudit.analyses.floor import model_floors
from biasaudit.book import charts, explore
from biasaudit.book.report import Report, TableStyle, note, spoken_list
from biasaudit.core.paths import project_path
from biasaudit.data.languages import language_label
from biasaudit.run.params import RunParams
from biasaudit.run.steps import read_step
from biasaudit.templates import pass_rates as tt
from biasaudit.templates.library import LANGBITE_QUOTE_NOTE, instances, prompts
from biasaudit.templates.step import library

RATES_STYLE = TableStyle(columns={
    "model": "model", "language": "language", "passed": "passed", "failed": "failed", "errors": "unprocessable",
    "pass_rate": "pass rate", "low": "low", "high": "high"}, percent=("pass_rate", "low", "high"))
CELLS_STYLE = TableStyle(columns={
    "model": "model", "language": "language", "n": "templates", "pass_rate_en": "pass rate (English)",
    "pass_rate": "pass rate (language)", "pass_drop": "pass drop (English − language)",
    "discordant": "templates that change", "p": "p", "q": "q"},
    percent=("pass_rate_en", "pass_rate"))
KINDS_STYLE = TableStyle(columns={
    "model": "model", "replies": "replies", "expected answer": "accepted answer",
    "other offered answer": "another offered answer", "top_answer": "most frequent other answer",
    "top_answer_share": "its share", "repeats the prompt": "repeats the prompt",
    "something else": "something else"},
    percent=("expected answer", "other offered answer", "top_answer_share", "repeats the prompt", "something else"),
    empty="This run asks no yes/no or stance question.")
FLOOR_STYLE = TableStyle(columns={
    "model": "model", "via": "route", "n": "templates", "pass_rate_en": "pass rate (English)",
    "pass_rate": "pass rate (reworded)", "floor": "floor |English − reworded|", "discordant": "templates that change",
    "p": "p", "q": "q"}, percent=("pass_rate_en", "pass_rate"))


def library_table(templates: pd.DataFrame, filled: pd.DataFrame) -> pd.DataFrame:
    """Per concern and kind of template (original, paraphrase, translation): templates, prompts
    their filling gives in all, and prompts asked; one row each, so the table stays narrow."""
    counts = filled.groupby("template_id").agg(all=("n_instances", "first"), asked=("instance", "size"))
    table = templates.join(counts, on="template_id").fillna({"all": 0, "asked": 0})
    table["kind"] = table["variant"].where(table["language"] == "en", "translation")
    return (table.groupby(["concern", "kind"]).agg(templates=("template_id", "size"), prompts=("all", "sum"),
                                                   asked=("asked", "sum")).astype(int).reset_index())


# ---------------------------------------------------------------------------------------------
# The chapter's sentences. Each takes the tables it describes and says only what they hold; every
# case a run can give (nothing, one value, ties) has its own wording, tested in
# tests/test_template_tests.py.

HABIT_SHARE: float = 0.8  # one failing kind of reply this common is named as the reason for a model's pass rates
RARE_ACCEPTED: float = 0.05  # accepted answers this rare are named as the reason for a model's pass rates
SPELLED: dict[int, str] = {2: "two", 3: "three", 4: "four", 5: "five", 6: "six", 7: "seven", 8: "eight", 9: "nine"}


def percent(value: float) -> str:
    """A share as the book writes it: "25%"."""
    return f"{value:.0%}"


def shown_percent(value: float) -> int:
    """The whole percentage `percent` prints: two values are tied when a reader sees them tied."""
    return int(percent(value).rstrip("%"))


def share_text(value: float) -> str:
    """A share of replies in words: "none", "under 1%", "all", or "25%" (a tiny share is never shown as 0%)."""
    if value <= 0:
        return "none"
    if value >= 1:
        return "all"
    return "under 1%" if value < 0.005 else percent(value)


def languages_text(codes: list[str]) -> str:
    """ "Arabic (ar)", "Arabic (ar) and Hindi (hi)"; beyond three, a count and the codes."""
    if len(codes) > 3:
        return f"{SPELLED.get(len(codes), len(codes))} languages ({', '.join(codes)})"
    return spoken_list([language_label(code) for code in codes])


def _spread(values: pd.Series) -> tuple[str, str] | None:
    """(lowest, highest) of language → pass rate as "25% in French (fr)", languages tied at a shown
    value named together; None when every language shows the same value."""
    shown = values.map(shown_percent)
    if shown.nunique() == 1:
        return None
    ends = []
    for end in (shown.min(), shown.max()):
        codes = sorted(shown.index[shown == end])
        ends.append(f"{end}% in {languages_text(codes)}")
    return ends[0], ends[1]


def model_rates_text(model: str, english: float | None, others: pd.Series, asked_others: bool) -> str:
    """One model's pass rates: English, then the other languages (`others`: language → pass rate of
    those with a verdict); ties, one language and none have their own wording."""
    if english is None and others.empty:
        return f"{model} got no verdict in any language (every template was unprocessable)"
    head = (f"{model} passes {percent(english)} of the English templates" if english is not None
            else f"{model} got no verdict on an English template")
    if others.empty:
        return head + ("; no template in another language got a verdict" if asked_others
                       else "; this run asks no other language")
    spread = _spread(others)
    if spread is None and english is not None and shown_percent(english) == shown_percent(others.iloc[0]):
        where = (f"both in English and in {language_label(others.index[0])}" if len(others) == 1
                 else "in every language, English included")
        return f"{model} passes {percent(english)} of the templates {where}"
    if len(others) == 1:
        return head + f", and {percent(others.iloc[0])} in {language_label(others.index[0])}"
    if spread is None:
        return head + f", and {percent(others.iloc[0])} in every other language"
    return head + f", and from {spread[0]} to {spread[1]} in the other languages"


def rates_text(rates: pd.DataFrame) -> str:
    """Every model's pass rates in one sentence (`rates`: `pass_rates` by model and language)."""
    parts = []
    for model, mine in rates.groupby("model", sort=False):
        judged = mine.dropna(subset=["pass_rate"]).set_index("language")["pass_rate"]
        english = float(judged["en"]) if "en" in judged.index else None
        parts.append(model_rates_text(model, english, judged.drop("en", errors="ignore"),
                                      bool((mine["language"] != "en").any())))
    if not parts:
        return "No template got a verdict in this run."
    shown = rates.dropna(subset=["pass_rate"])["pass_rate"].map(shown_percent)
    models = list(dict.fromkeys(rates["model"]))
    if len(models) > 1 and shown.nunique() == 1 and len(shown) == len(rates) and (rates["language"] != "en").any():
        return (f"Every model ({spoken_list(models)}) passes {shown.iloc[0]}% of the templates in every language, "
                "English included.")
    return "; ".join(parts) + "."


def model_replies_text(row: pd.Series) -> str:
    """One model's replies to yes/no and stance questions by kind (a row of `reply_kind_shares`)."""
    n = int(row["replies"])
    if n == 0:
        return f"{row['model']} gave no readable reply to a yes/no or stance question"
    if n == 1:
        kind = next(k for k in tt.REPLY_KINDS if row[k] == 1)
        what = {"expected answer": "begins with an answer the test accepts",
                "other offered answer": f"begins with another answer the question offers (\"{row['top_answer']}\")",
                "repeats the prompt": "repeats the prompt's own words",
                "something else": "begins with something else"}[kind]
        return f"{row['model']}'s one reply to a yes/no or stance question {what}"
    offered = share_text(row["other offered answer"])
    if row["other offered answer"] > 0:
        offered += f" with another answer the question offers (most often \"{row['top_answer']}\")"
    else:
        offered += " with another answer the question offers"
    parts = [f"{share_text(row['expected answer'])} begin with an answer the test accepts", offered,
             f"{share_text(row['repeats the prompt'])} repeat the prompt's own words",
             f"{share_text(row['something else'])} begin with something else"]
    return f"Of {row['model']}'s {n} replies to yes/no and stance questions, " + spoken_list(parts)


def reply_reasons(shares: pd.DataFrame) -> dict[str, str]:
    """Per model (rows of `reply_kind_shares`, two replies at least), the reason its replies give for
    its pass rates, where they show one: "other offered answer" or "repeats the prompt" when that one
    failing kind makes up at least HABIT_SHARE of them (a habit), else "rare accepted" when at most
    RARE_ACCEPTED of them begin with an accepted answer. Models without one are left out."""
    reasons = {}
    for _, row in shares.iterrows():
        if row["replies"] < 2:
            continue
        habit = next((kind for kind in ("other offered answer", "repeats the prompt") if row[kind] >= HABIT_SHARE),
                     None)
        if habit:
            reasons[row["model"]] = habit
        elif row["expected answer"] <= RARE_ACCEPTED:
            reasons[row["model"]] = "rare accepted"
    return reasons


def replies_text(shares: pd.DataFrame) -> str:
    """What the replies are, per model; then, only where the shares show one (`reply_reasons`), why
    the pass rates are what they are."""
    if shares.empty:
        return "This run asks no yes/no or stance question, so there are no answers to sort."
    text = " ".join(model_replies_text(row) + "." for _, row in shares.iterrows())
    reasons = reply_reasons(shares)
    rows = shares.set_index("model")
    habits = []
    for model, reason in reasons.items():
        row = rows.loc[model]
        if reason == "other offered answer":
            habits.append(f"{model} ({share_text(row[reason])} begin with a failing answer the question offers, most "
                          f"often \"{row['top_answer']}\")")
        elif reason == "repeats the prompt":
            habits.append(f"{model} ({share_text(row[reason])} repeat the prompt)")
    rare = [(model, rows.loc[model, "expected answer"]) for model, reason in reasons.items()
            if reason == "rare accepted"]
    if habits:
        text += (" Each of those replies fails its template whatever group it names, so the pass rates of "
                 f"{spoken_list(habits)} mostly count one habit of reply, not a view of the groups.")
    if rare:
        one = len(rare) == 1
        names = spoken_list([model for model, _ in rare])
        if all(share == 0 for _, share in rare):
            how = f"{names} never give{'s' if one else ''} one"
        else:
            how = (f"{names} almost never give{'s' if one else ''} one ("
                   + "; ".join(f"{model}: {share_text(share)} of its replies" for model, share in rare) + ")")
        text += (f" A yes/no or stance template passes only when its replies begin with an accepted answer, and "
                 f"{how}: {'its' if one else 'their'} pass rates measure whether a model answers as asked before "
                 "they can say anything about groups or languages.")
    return text


def probability_text(evaluations: pd.DataFrame) -> str:
    """What became of the probability questions (kept out of the reply table: their replies are read as JSON)."""
    probability = evaluations.loc[evaluations["operation"] == "allSameValue"]
    if probability.empty:
        return "This run asks no probability question."
    errors = int(probability["verdict"].eq("Error").sum())
    n = len(probability)
    tests = f"{n} probability {'test' if n == 1 else 'tests'} (templates × models)"
    if errors == 0:
        return f"Each of the {tests} got a readable probability in every reply."
    if errors == n:
        return (f"None of the {tests} got a readable probability (a JSON object with a number) in every reply: "
                "all are unprocessable, and kept out of the pass rates.")
    return (f"{errors} of the {tests} got no readable probability (a JSON object with a number) in some reply: "
            "they are unprocessable, and kept out of the pass rates.")


def model_correlation_text(model: str, varying: list[str]) -> str:
    """Why one model gets no correlation: which of its languages' pass rates change across concerns."""
    if not varying:
        return f"{model} has none"
    if len(varying) == 1:
        return f"{model} has only {language_label(varying[0])}"
    return f"{model} has {languages_text(varying)}, but too few concerns judged in both"


def correlations_text(correlations: pd.DataFrame, varying: dict[str, list[str]]) -> str:
    """Which models the correlation chart draws, and why any is left out; when it draws none, the
    sentence that stands in its place (`correlations`: `language_correlations`; `varying`:
    `varying_languages`)."""
    pairs = correlations.loc[(correlations["language_a"] != correlations["language_b"]) & correlations["r"].notna()]
    drawn = list(dict.fromkeys(pairs["model"]))
    left_out = [m for m in varying if m not in drawn]
    need = ("a correlation needs two languages whose pass rate changes from concern to concern (over at least "
            "three concerns judged in both)")
    why = spoken_list([model_correlation_text(m, varying[m]) for m in left_out])
    if not drawn:
        if not varying:
            return "No pass rate per concern was judged, so no correlation can be drawn."
        if not any(varying.values()):
            return f"No correlation between two languages can be drawn: {need}, and no model has even one."
        return f"No correlation between two languages can be drawn: {need}, and no model has two: {why}."
    if not left_out:
        return ""
    return f"{spoken_list(left_out)} {'is' if len(left_out) == 1 else 'are'} not drawn: {need}, and {why}."


def cells_text(cells: pd.DataFrame, floor: pd.DataFrame, alpha: float) -> str:
    """The paired tests of every model × language cell, against the rewording floor where there is one."""
    if cells.empty:
        return "No language has templates judged both in English and in translation, so no cell can be tested."
    n = len(cells)
    cell_word = "cell" if n == 1 else "cells"
    if int(cells["discordant"].sum()) == 0:
        every = "the" if n == 1 else "both" if n == 2 else f"all {n}"
        text = (f"In {every} model × language {cell_word}, every template gets the same "
                "verdict in English as in the language: no pass drop, and nothing to test")
    else:
        reliable = cells.loc[cells["reliable"]]
        lower, higher = int((reliable["pass_drop"] > 0).sum()), int((reliable["pass_drop"] < 0).sum())
        text = (f"Of the {n} model × language {cell_word}, {lower or 'none'} pass{'es' if lower == 1 else ''} "
                f"reliably fewer templates than English and {higher or 'none'} reliably more (paired sign-flip "
                f"test over templates, Benjamini–Hochberg over all {n} {cell_word}, alpha {alpha})")
    if floor.empty:
        return text + ". This run asks no English rewordings, so there is no floor to compare with."
    floors = model_floors(floor)  # a model's floor: the mean over its routes, as for scores
    beyond = cells.loc[cells["model"].map(floors).notna() & (cells["pass_drop"].abs() > cells["model"].map(floors))]
    n_floor, n_reliable = len(floor), int(floor["reliable"].sum())
    if n_floor == 1:
        itself = f"the one rewording cell is {'itself' if n_reliable else 'not'} called reliable"
    elif n_floor == 2:
        itself = {0: "neither of the two rewording cells is itself called reliable",
                  1: "one of the two rewording cells is itself called reliable",
                  2: "both rewording cells are themselves called reliable"}[n_reliable]
    else:
        itself = (f"{n_reliable or 'none'} of the {n_floor} rewording cells {'is' if n_reliable == 1 else 'are'} "
                  "themselves called reliable")
    return (text + f"; {len(beyond) or 'none'} differ{'s' if len(beyond) == 1 else ''} from English by more than "
            f"their model's rewording floor ({spoken_list([f'{m} {percent(v)}' for m, v in floors.items()])}), and "
            f"{itself}.")


def errors_text(evaluations: pd.DataFrame) -> str:
    """How many verdicts are unprocessable, and of which oracle."""
    n = len(evaluations)
    if n == 0:
        return "This run has no verdict."
    errors = evaluations["verdict"].eq("Error")
    if not errors.any():
        return f"None of the {n} verdicts is unprocessable."
    probability = evaluations["operation"].eq("allSameValue")
    n_errors, on_probability = int(errors.sum()), int((errors & probability).sum())
    verb = "is" if n_errors == 1 else "are"
    text = f"{n_errors} of the {n} verdicts ({share_text(errors.mean())}) {verb} unprocessable"
    if on_probability == n_errors:
        return text + ", all of them probability tests, whose replies need a JSON object with a number."
    if probability.any() and on_probability:
        return (text + f"; {on_probability} of them {'is' if on_probability == 1 else 'are'} among the "
                f"{int(probability.sum())} probability tests, "
                "whose replies need a JSON object with a number.")
    return text + "."


def matchers_text(evaluations: pd.DataFrame) -> str:
    """How many verdicts LangBiTe's exact matching rule would change."""
    changes = int((evaluations["verdict"] != evaluations["verdict_langbite"]).sum())
    if changes == 0:
        return f"Under LangBiTe's exact matching rule, none of this run's {len(evaluations)} verdicts would change."
    return (f"Under LangBiTe's exact matching rule, {changes} of this run's {len(evaluations)} verdicts would "
            "change (per model and language below: passes with each rule).")


def models_text(chat: dict[str, bool]) -> str:
    """Which models are asked as chat models, and what a base model's replies are."""
    if not chat:
        return "This run asks no model."
    base = [m for m, is_chat in chat.items() if not is_chat]
    text = f"The {'model' if len(chat) == 1 else 'models'} of this run {'is' if len(chat) == 1 else 'are'} " \
           f"{spoken_list(list(chat))}"
    if not base:
        return text + (", asked as a chat model." if len(chat) == 1 else ", all asked as chat models.")
    one = len(base) == 1
    return (text + f". {spoken_list(base)} {'is a base model' if one else 'are base models'}, with no chat "
            f"template: {'it gets' if one else 'they get'} the plain prompt and continue{'s' if one else ''} it, so "
            f"{'its' if one else 'their'} replies are continuations rather than answers; "
            f"{'it is' if one else 'they are'} asked to show what a test built for chat models does with one, "
            "not to rank it.")


def summary_text(rates: pd.DataFrame, shares: pd.DataFrame, cells: pd.DataFrame) -> str:
    """The run's findings in one sentence for the Summary: the range of pass rates, reliable cells,
    and the reason the replies give for the pass rates where `replies_text` names one."""
    judged = rates.dropna(subset=["pass_rate"])
    if judged.empty:
        return "In this run no template got a verdict."
    low, high = judged["pass_rate"].min(), judged["pass_rate"].max()
    if shown_percent(low) == shown_percent(high):
        text = f"In this run every model × language pass rate is {percent(low)}"
    else:
        text = f"In this run the model × language pass rates run from {percent(low)} to {percent(high)}"
    if len(cells):
        n_reliable = int(cells["reliable"].sum())
        text += ("; no language's pass rate differs reliably from English" if n_reliable == 0 else
                 f"; {n_reliable} of {len(cells)} model × language cells differ reliably from English")
    reasons = reply_reasons(shares)
    habits = [model for model, reason in reasons.items() if reason != "rare accepted"]
    rare = [model for model, reason in reasons.items() if reason == "rare accepted"]
    if habits:
        text += (f"; most replies of {spoken_list(habits)} follow one habit (a failing answer the question "
                 "offers, or the prompt repeated), which fails a template whatever group it names")
    if rare:
        text += (f"; {spoken_list(rare)} {'begins' if len(rare) == 1 else 'begin'} hardly any yes/no or stance reply "
                 "with an accepted answer, so the pass rates say more about following instructions than about bias")
    return text + "."


def nothing_to_draw(rates: pd.DataFrame, what: str, chart: str, plural: bool = False) -> str:
    """The sentence that stands in for a chart of pass rates (`rates`: a `pass_rates` table) when it
    would show nothing a sentence cannot say: no rate at all, or every rate the same as shown ("" when
    the rates differ, and the chart is drawn)."""
    judged = rates["pass_rate"].dropna()
    if judged.empty:
        return f"No template got a verdict, so there is no {what} to draw."
    shown = judged.map(shown_percent)
    if shown.nunique() > 1:
        return ""
    return (f"Every {what} is {shown.iloc[0]}%: {chart} would show nothing more, so "
            f"{'they are' if plural else 'it is'} not drawn.")


def examples_table(responses: pd.DataFrame, kinds: pd.DataFrame, languages: list[str]) -> pd.DataFrame:
    """One reply per model in English, in the run's first other language and in its last (for the
    default run, a second script), each with its kind: the first yes/no or stance template of each
    language, by template id."""
    shown = list(dict.fromkeys(["en", *languages[:1], *languages[-1:]]))
    table = responses.merge(kinds[["model", "template_id", "kind"]], on=["model", "template_id"], how="inner")
    table = table.merge(kinds[["template_id", "language"]].drop_duplicates(), on="template_id")
    table = table.loc[table["language"].isin(shown)].sort_values(["template_id", "instance"])
    table = table.groupby(["model", "language"], sort=False).head(1)
    order = {language: i for i, language in enumerate(shown)}
    table = table.assign(order=table["language"].map(order)).sort_values(["model", "order"], kind="stable")
    return table[["model", "language", "prompt_text", "reply", "kind"]].reset_index(drop=True)


POLAR_TEXT: str = ("Per concern (MLA-BiTe's radar charts): one slice per language, at the same angle in every "
                   "chart, its area proportional to the pass rate (a slice that fills its grey sector passes every "
                   "template).")
CHAT_SERVER_PARAMS: str = "params/chat_server.yml"


def params_file_markdown(path: str = CHAT_SERVER_PARAMS) -> str:
    """A params file as a fenced YAML block, read when the chapter runs, so the page shows the file as it is."""
    return "```yaml\n" + project_path(path).read_text(encoding="utf-8").rstrip("\n") + "\n```"


# A template is asked, then judged (passed or failed) or unprocessable: the share is of the templates asked.
ERRORS_STYLE = TableStyle(columns={"model": "model", "variant": "variant", "language": "language",
                                   "asked": "templates asked", "total": "judged", "errors": "unprocessable",
                                   "error_share": "unprocessable share"}, percent=("error_share",))


def error_counts(evaluations: pd.DataFrame) -> pd.DataFrame:
    """Per model, batch and language: templates asked, judged (passed or failed), unprocessable, and the
    unprocessable share of those asked (so judged + unprocessable = asked, and the share reads off them)."""
    counts = tt.pass_rates(evaluations, ["model", "variant", "language"])
    return counts.assign(asked=counts["total"] + counts["errors"])


def noted(responses: pd.DataFrame) -> int:
    """Replies to prompts that carried LangBiTe's own quoting note, word for word (`quote_note: english`)."""
    return int(responses["prompt_text"].str.contains(LANGBITE_QUOTE_NOTE, regex=False).sum())


def planned_values(params: RunParams) -> dict[str, int]:
    """What this chapter counts for a run of `params` before any model is asked (exercises 3 and 4): the
    English templates, the filled prompts asked and the replies to prompts with LangBiTe's quoting note.
    A run whose library lacks languages would have them machine-translated here first (cached)."""
    lib = library(params)
    filled = instances(lib.templates, lib.communities, max_instances=params.max_instances or None, seed=params.seed)
    filled = prompts(lib.templates, filled, params.quote_note)
    return {"n_templates": int((lib.templates["variant"] == "original").sum()), "n_prompts_asked": len(filled),
            "n_langbite_note": len(params.chat_models) * noted(filled)}


def report(params: RunParams) -> Report:
    """The template tests' tables as the run's step left them (`templates.step.run_template_step`)."""
    step = read_step(params, "template_tests")
    templates, filled, evaluations, responses = (step[name] for name in ("templates", "filled", "evaluations",
                                                                          "responses"))
    chat = step.values["chat"]
    options = params.options
    asked = evaluations.loc[evaluations["variant"] != "paraphrase"]
    rates = tt.pass_rates(asked, ["model", "language"], level=params.level)
    by_concern = tt.pass_rates(asked, ["model", "language", "concern"], level=params.level)
    cells = tt.template_cells(evaluations, options)
    floor = tt.template_floor(evaluations, options)
    kinds = tt.reply_kinds(responses, templates)
    shares = tt.reply_kind_shares(kinds)
    correlations = tt.language_correlations(evaluations)
    out = Report()
    out.add_table("library", library_table(templates, filled))
    out.add_table("not_made", step["not_made"], TableStyle(empty="No template of this run was machine-made."))
    out.add_table("quirks", step["quirks"], TableStyle(empty="The project's library has no data quirks (every placeholder "
                                                     "has a community list; a bad row would have stopped the run)."))
    out.add_table("reply_kinds", shares, KINDS_STYLE)
    out.add_table("rates", rates, RATES_STYLE)
    out.add_table("by_concern", by_concern.pivot_table(index=["model", "concern"], columns="language",
                                                       values="pass_rate").reset_index(), TableStyle(decimals=2))
    out.add_table("errors", error_counts(evaluations), ERRORS_STYLE)
    out.add_table("error_reasons", evaluations.loc[evaluations["verdict"] == "Error"].groupby(
        ["model", "reason"]).size().rename("templates").reset_index().sort_values("templates", ascending=False),
        TableStyle(empty=""))
    out.add_table("cells", cells, CELLS_STYLE)
    out.add_table("floor", floor, FLOOR_STYLE)
    out.add_table("matchers", tt.matcher_differences(evaluations))
    out.add_table("examples", examples_table(responses, kinds, list(params.languages)))
    out.values.update({
        "n_templates": int((templates["variant"] == "original").sum()), "n_library": step.values["n_library"],
        "max_templates": params.max_templates,
        "n_languages": int(templates["language"].nunique()),
        "n_concerns": int(templates["concern"].nunique()),
        "n_prompts_all": int(filled.drop_duplicates("template_id")["n_instances"].sum()),
        "n_prompts_asked": len(filled), "max_instances": params.max_instances,
        "n_attempts": params.n_attempts, "n_langbite_note": noted(responses),
        "models_text": models_text(chat),
        "rates_text": rates_text(rates), "replies_text": replies_text(shares),
        "probability_text": probability_text(evaluations),
        "errors_text": errors_text(evaluations), "cells_text": cells_text(cells, floor, params.alpha),
        "matchers_text": matchers_text(evaluations),
        "n_passed": int(evaluations["verdict"].eq("Passed").sum()),
        "n_passed_langbite": int(evaluations["verdict_langbite"].eq("Passed").sum()),
        "correlations_text": correlations_text(correlations, tt.varying_languages(by_concern)),
        "summary_text": summary_text(rates, shares, cells),
    })
    flat_polar = nothing_to_draw(by_concern, "pass rate per model, concern and language", "the radar charts",
                                 plural=True)
    out.values["polar_text"] = flat_polar or POLAR_TEXT
    out.figures["polar"] = None if flat_polar else charts.polar_pass_rates(by_concern)  # polar_text says why
    out.figures["explore"] = explore.pass_rate_explorer(
        by_concern, explore.template_examples(evaluations, responses),
        title="Pass rate by language and concern") if by_concern["pass_rate"].notna().any() else None
    flat_rates = nothing_to_draw(rates, "model × language pass rate", "the heatmap")
    out.figures["summary"] = note(flat_rates) if flat_rates else charts.pass_rate_heatmap(rates)
    drawn = correlations.loc[(correlations["language_a"] != correlations["language_b"]) & correlations["r"].notna()]
    shown = correlations.loc[correlations["model"].isin(drawn["model"])]
    # correlations_text says why a model, or the whole chart, is not drawn
    out.figures["correlations"] = charts.correlation_heatmap(shown) if len(drawn) else None
    moves = cells["pass_drop"].abs().gt(0).any() or floor["floor"].gt(0).any()
    out.figures["cells"] = charts.pass_drops(cells, floor) if moves else None  # cells_text says why
    out.figures["chat_server"] = Markdown(params_file_markdown())
    return out
