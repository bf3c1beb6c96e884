"""Ranking experiments for issue 16: lexical, fusion, routing and LoCoMo units over four corpora."""
