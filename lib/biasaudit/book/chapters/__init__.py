"""One function per chapter of the book: `<module>.report(params)` computes everything a notebook
shows (its tables, its figures, and the values its prose quotes, conditional phrases included) and
returns a `biasaudit.book.report.Report`. Notebooks hold the narrative, the parameters and this one
call. Each module is named after its notebook, without the number:

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
