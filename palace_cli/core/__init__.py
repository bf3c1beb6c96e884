"""The domain: the note model and its file format, config, names, validity, text helpers. Imports no other room."""
