"""A small LoCoMo-shaped conversation, written for these tests: two people, three sessions, observations, questions."""

from __future__ import annotations

import json
from pathlib import Path

SESSIONS = [
    ("1:56 pm on 8 May, 2023", [
        ("Ada", "Hey Ben! Good to see you! How have you been?"),
        ("Ben", "Hey Ada! I'm good, thanks. What's new with you?"),
        ("Ada", "I work as a nurse at the city hospital, and yesterday I ran my first half marathon with my "
                "sister. It was exhausting but I finished in two hours!"),
        ("Ben", "Wow, that's amazing! Congrats!"),
        ("Ada", "Thanks! I love hiking in the mountains too, it clears my head after long shifts at the hospital."),
        ("Ben", "Nice. My dog Pepper and I are training for an agility competition next month, she is so fast."),
        ("Ada", "Cool! Good luck!"),
    ]),
    ("10:00 am on 20 June, 2023", [
        ("Ben", "Hi Ada! Long time no talk!"),
        ("Ada", "Hi Ben! Big news: last week I started a new job as a teacher at the primary school downtown, "
                "so I left the hospital for good."),
        ("Ben", "Congrats!"),
        ("Ada", "Thanks! I love hiking in the mountains, it clears my head after long shifts."),
        ("Ben", "Pepper won second place in the agility competition last Saturday, I was so proud of her!"),
        ("Ada", "Awesome!"),
    ]),
    ("7:30 pm on 2 August, 2023", [
        ("Ada", "Hey Ben, how was your weekend?"),
        ("Ben", "Great! I finally adopted a second dog from the shelter, a shy greyhound called Biscuit, two days "
                "ago. Pepper already likes him."),
        ("Ada", "That's so sweet! I'm planning a trip to Norway next month with my sister to hike the fjords."),
        ("Ben", "Sounds great, have fun!"),
    ]),
]
OBSERVATIONS = {
    "session_1_observation": {
        "Ada": [["Ada works as a nurse at the city hospital.", "D1:3"],
                ["Ada ran her first half marathon with her sister and finished in two hours.", "D1:3"],
                ["Ada loves hiking in the mountains because it clears her head after shifts.", "D1:5"]],
        "Ben": [["Ben and his dog Pepper are training for an agility competition.", "D1:6"]],
    },
    "session_2_observation": {
        "Ada": [["Ada started a new job as a teacher at a primary school downtown and left the hospital.", "D2:2"]],
        "Ben": [["Pepper won second place in the agility competition, and Ben was proud.", "D2:5"]],
    },
    "session_3_observation": {
        "Ben": [["Ben adopted a second dog, a shy greyhound called Biscuit, from the shelter.", "D3:2"]],
        "Ada": [["Ada is planning a trip to Norway with her sister to hike the fjords.", "D3:3"]],
    },
}
QUESTIONS = [
    {"question": "Where does Ada work as a nurse?", "answer": "the city hospital", "evidence": ["D1:3"], "category": 4},
    {"question": "What job did Ada start in June 2023?", "answer": "teacher", "evidence": ["D2:2"], "category": 4},
    {"question": "What is the name of Ben's greyhound?", "answer": "Biscuit", "evidence": ["D3:2"], "category": 4},
    {"question": "Where is Ada travelling with her sister?", "answer": "Norway", "evidence": ["D3:3"], "category": 4},
]


def locomo_sample(sample_id: str = "conv-t") -> dict:
    """One LoCoMo sample of the conversation above."""
    conversation = {"speaker_a": "Ada", "speaker_b": "Ben"}
    for number, (when, turns) in enumerate(SESSIONS, 1):
        conversation[f"session_{number}_date_time"] = when
        conversation[f"session_{number}"] = [{"speaker": speaker, "dia_id": f"D{number}:{i}", "text": text}
                                             for i, (speaker, text) in enumerate(turns, 1)]
    return {"sample_id": sample_id, "conversation": conversation, "observation": OBSERVATIONS, "qa": QUESTIONS}


def write_locomo(path: Path) -> Path:
    """The sample as a LoCoMo file."""
    path.write_text(json.dumps([locomo_sample()], indent=1), encoding="utf-8")
    return path
