"""The book: chapter reports, tables and charts, prose helpers, the run of every notebook, fonts, Sphinx hooks."""
