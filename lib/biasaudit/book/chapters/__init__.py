"""One function per chapter of the book: `<module>.report(params)` reads what the run stored and
formats everything a notebook shows (its tables, its figures, and the values its prose quotes,
conditional phrases included) as a `biasaudit.book.report.Report`. It loads no model: where a
chapter needs one (00, 01, 02, 20, 30, 31), its notebook first calls the step that computes and
stores the tables (`run.pipeline`, `translate.step`, `templates.step`, `templates.comparison`; see
`run.steps`). Notebooks hold the narrative, the parameters, the step and this one call. Each module
is named after its notebook, without the number:

| notebook | module |
|---|---|
| 00_items | `items` |
| 01_translate | `translate` |
| 02_score | `score` |
| 10_language_drops | `language_drops` |
| 11_noise_floor | `noise_floor` |
| 12_models | `models` |
| 13_carry_over | `carry_over` |
| 14_sources | `sources` |
| 15_dimensions | `dimensions` |
| 16_faithful | `faithful` |
| 17_summed | `summed` |
| 18_agreement | `agreement` |
| 19_detection | `detection` |
| 20_label_errors | `label_errors` |
| 21_case_study | `case_study` |
| 22_verdict | `verdict` |
| 30_template_tests | `template_tests` |
| 31_template_translation | `template_translation` |
| 40_reliability | `reliability` |
"""
