"""A small mixed palace: notes about budgets and deploys beside an imported chat that holds other facts.

The chat holds the Kyoto offsite's budget cap; the notes hold other budgets (a project's, the office's)
and the deploy window. A question about the offsite must be answered from the chat, a question about
deploys from the notes, with no chat turn beside them.
"""

from __future__ import annotations

from pathlib import Path

from palace_cli.editing.authoring import add_memory, init_palace
from palace_cli.importers import import_path
from palace_cli.palace import Palace

CHAT = """# Kyoto offsite planning
2025-03-03
[10:02] Mika: The budget cap for the Kyoto offsite is 1.2 million yen, flights included.
[10:05] Jon: Great, I'll book the ryokan near Gion for three nights.
[10:09] Mika: Webpack builds are slow again; the bundle grew to 4 MB.
[10:12] Jon: Let's split the vendor chunk after the trip.
[10:15] Mika: Also, the temple tour on Saturday starts at 9.
"""

NOTES = [
    ("Aardvark Project Budget", "projects", "an aardvark counting coins",
     "An aardvark in a green visor counts brass coins into nine jars on a desk of moss.",
     "The Aardvark project has a budget cap of 40,000 euros for the third quarter. Spending above the cap "
     "needs the director's approval.", ["budget", "aardvark"]),
    ("Office Supplies", "office", "a stapler on a throne",
     "A chrome stapler sits on a velvet throne while paper clips bow before it.",
     "The office stapler budget is 200 euros a year. Staplers are ordered in January.", ["stapler", "office"]),
    ("Deploy Window", "engineering", "a drawbridge that opens twice a week",
     "A drawbridge lowers only on Tuesday and Thursday mornings while a brass bell rings seven times.",
     "We deploy to production on Tuesdays and Thursdays between 10:00 and 15:00. Nothing is deployed on "
     "Fridays, so that a failed release never spoils a weekend.", ["deploy", "release", "production"]),
]


def kyoto_palace(root: Path) -> Palace:
    """The notes above in a fresh palace, and the chat imported beside them (one session, five turns)."""
    palace = Palace(init_palace(root, name="Team"))
    for subject, domain, anchor, image, content, keywords in NOTES:
        add_memory(palace, subject, domain, anchor=anchor, image=image, content=content, keywords=keywords)
    chat = root.parent / "offsite-chat.md"
    chat.write_text(CHAT, encoding="utf-8")
    import_path(palace, chat)
    palace.refresh()
    return palace
