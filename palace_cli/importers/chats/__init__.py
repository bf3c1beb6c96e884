"""Conversations from chat tools: one reader per source format and the writer of session files into a palace.

A reader is a module with `FORMAT`, `SUFFIXES`, `sniff(head)` and `read(path, include)`, registered by one line
in `palace_cli.importers.formats.TABLE` (the one table of every format `palace import` reads). `reading` and
`jsonstream` are what the readers share; `writer` puts their sessions into conversations/<source>/.
"""
