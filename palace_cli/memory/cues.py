"""How people working with a coding agent mark what lasts: the cue patterns distill reads a work session with.

Pure patterns over English text, written from the shape of what is said (a rule, a choice, an acceptance, a
proposal, a report that something shipped, a fix that was checked), never from the words of one project. Each
pattern is a question a careful reader asks of a sentence; scorer.py weighs the answers.
"""

from __future__ import annotations

import re
from functools import lru_cache

from palace_cli.core.secrets import redact

I = re.IGNORECASE


@lru_cache(maxsize=1 << 14)
def _lower(text: str) -> str:
    return text.lower()


class Cue:
    """A pattern read over the lowercased text: twice as fast as IGNORECASE on these alternations, and distill
    asks a few dozen of them of every sentence."""

    def __init__(self, pattern: str):
        self.pattern = re.compile(pattern)

    def search(self, text: str):
        return self.pattern.search(_lower(text))

    def match(self, text: str):
        return self.pattern.match(_lower(text))

    def fullmatch(self, text: str):
        return self.pattern.fullmatch(_lower(text))

    def findall(self, text: str) -> list:
        return self.pattern.findall(_lower(text))


def cue(pattern: str) -> Cue:
    """A Cue: `pattern` written in lowercase."""
    return Cue(pattern)

# Words in quotes are mentioned, not used: "ignore Marek's 'from now on' line" makes no rule.
QUOTED = re.compile(r"(?<!\w)['\u2018\"\u201c][^'\u2019\"\u201d\n]{1,60}['\u2019\"\u201d](?!\w)")


class OutsideQuotes(Cue):
    """A Cue read outside the sentence's quoted words (QUOTED)."""

    def search(self, text: str):
        return self.pattern.search(QUOTED.sub(" ", _lower(text)))


# A standing rule: how a recurring thing is done, said with the words that make a rule general.
RULE = OutsideQuotes(r"\b(always|never|every\b(?! \d)|all (?:new|our)|"
                  r"all (?:the|of)\b(?![^.,;]*\b(?:are|were|was|is)\b)|from now on|going forward|"
                  r"(?<!week )(?<!weeks )(?<!day )(?<!days )(?<!month )(?<!months )(?<!year )(?<!years )(?<!hour )"
                  r"(?<!hours )(?<!minutes )from now\b(?! until| till| to\b)|"
                  r"in general|as a rule|(?:make (?:it|that|this) )?(?<!not )(?<!n't )(?:a|the|our|team|house) (?:rule|standard|"
                  r"convention|policy)|rule(?: is|:)|no exceptions?|(?<!\bso )(?<!so that )(?:we|you) (?:don't|do not|never|always|only|"
                  r"use|prefer|keep)\b|(?<!time )(?<!than )(?<!best )(?<!first )ever\b(?! since)|must(?:n't| not)?\b|is how we|that's how we|only (?:ever )?(?:from|"
                  r"by|via|through|after|when|on)\b|(?:we|i) prefer|prefer(?:s|red)? \w+ (?:over|to)|\bno [\w-]+(?: [\w-]+){0,2} "
                  r"anymore\b|\bno more [\w-]+|(?:are|is) (?:banned|forbidden|not allowed)\b)")
# A sentence that says outright what it is: a decision or a rule named as one, a preference in the first person.
STRONG = OutsideQuotes(r"^\W*(?:decision|decided|rule|convention|policy|standard|going forward|from now on|as a rule|"
             r"(?:i|we)(?:'ve| have)? (?:always|never|prefer|decided|use)|(?:always|never)\b|(?:i|we) (?:don'?t|do "
             r"not) (?:ever|use|do)|make (?:it|that|this) (?:a rule|the standard)|let'?s (?:go with|use)|we(?:'ll| will| are|'re) "
             r"(?:go with|going with|use))|\b(?:from now on|going forward|as "
             r"a rule|that'?s (?:our|the|a) (?:team )?rule|is our rule|no exceptions?|every [\w-]+(?: [\w-]+)? must|must (?:always|"
             r"never))\b")
# "Summary:" opening a recap of what was done ("Summary of the plan:" recaps a plan, not a fix).
SUMMARY_MARK = r"summary(?! of (?:the )?(?:plan|decisions|options|proposals?|discussion))(?=[^.:]{0,30}:)"
SUMMARY = cue(rf"\b({SUMMARY_MARK}|to recap|recap|root cause|for the record)\b")
DECLARED = cue(r"^\W*(?:decision|decided|we(?:'ve| have)? decided|i(?:'ve| have)? decided)\b")
# A choice made for the project: a settled question.
CHOICE = cue(r"\b(let'?s (?:go with|use|do|keep|stick|make|not)|go(?:ing)? with|decided|decision|we(?:'ll| will) "
                    r"(?:use|go|keep|do|ship|drop|move|switch)|we keep|keep (?:it|them|the|using)|it is\s*(?:[.!,;]|$)|it's "
                    r"settled|instead of|rather than|not wait|(?:choose|chose|pick|picked) |settled? on|switch(?:ing)? "
                    r"to|stay(?:ing)? (?:with|on)|stick with|the plan is|(?:we|i) do (?:a |the )?\w+ now|(?:we|i) (?:agreed|agree) "
                    r"(?:to|on|that)|(?:we|i)'?d rather\b|we'?re (?:going|gonna) (?:to )?(?:use|go|keep|switch|move|ship))")
# A choice that closes a discussion: "same-transaction then", "13 months it is", "3 days lookback, yes".
SETTLED = cue(r"(?:^\W*(?:(?!that|it|this|in|no|not)\S+\s+){1,3}then|^\W*(?:\S+\s+){1,4}it is|,? yes|^\W*(?:\S+\s+){1,4}it'?s)\s*[.!]?\s*$|"
                     r"^(?:yes|ok|fine)[,.:]?\s+(?:to|for)\b")
# The reason a rule is given with ("that's how we find them later"): its words say nothing of how long it holds.
REASON_CLAUSE = re.compile(r"\b(?:that'?s how|that is how|which is how|because|so that|which is why|otherwise)\b[^.;!?]*")


class OutsideReasons(Cue):
    """A Cue read outside the sentence's reason clauses (REASON_CLAUSE)."""

    def search(self, text: str):
        return self.pattern.search(REASON_CLAUSE.sub(" ", _lower(text)))


# One turn's instruction, not a standing rule: waived, for now, only this once.
ONE_OFF = OutsideReasons(r"\b(for now|(?:this|it|that) once\b(?! every| a | per)|once now|just this once|only for this|for this (?:one|release|pr|time|run|file)|"
                     r"in this pr|not this pr|this pr|(?<!from )(?<!starting )(?<!as of )(?:today|tomorrow)|tonight|right now|temporar(?:y|ily)|later\b|"
                     r"while you'?re (?:in|at)|this time|for the moment|at the moment|next session|throwaway|one-?off|"
                     r"for the lines you touch|lines you touch)")
# What is only imagined or wished: never a memory.
HYPOTHETICAL = cue(r"^\W*(?:and |also |but |so )?(?:if we|if i|if you|if it|if (?:one day|ever|someday|at some point)|what if|imagine|in theory|maybe "
                          r"(?:we|later|one day)|one day)\b|\b(?:would(?:'ve| have)|could(?:'ve| have)|should(?:'ve| "
                          r"have)(?! (?:said|mentioned|told|asked|flagged|written|warned))|we'?d have|if we(?:'d| had| ever| moved| used| went))\b|\bjust thinking\b")
# A question put as a statement, or a thought said aloud.
HEDGE = cue(r"\b(i think|i guess|i suppose|maybe|perhaps|probably|not sure|no idea|i wonder|wondering|"
                   r"i thought|i believe|someone (?:on|in) the team|some (?:people|person)|might)\b")
# A question that asks someone to do something ("Before guessing, can we get a profile?", "could you paste it?"):
# what it asks for is an action, not something to know.
ASKS_TO_ACT = cue(r"^\W*(?:[\w-]+,?\s+){0,3}?(?:can|could|would|will) (?:you|we|i)\b|^\W*(?:(?:ok|so|and|also|now|"
                  r"then)\W+)*(?:please|pls|let me|let's)\b")
# A turn that asks why something happens: what it states is the symptom to look into, not a fact to keep ("the
# build takes 5 min, it took 3 before. why?", "... find out why").
ASKS_WHY = cue(r"^\W*(?:(?:and|so|but|ok)\W+)?(?:why\b|(?:find|figure) out why|any idea why|what'?s going on)")
# A request of the agent: what to do now.
REQUEST = cue(r"^\W*(?:(?:ok|okay|so|and|also|then|now|pls|please|yes|good|great|nice|fine|right)\W+)*"
                     r"(?:please|pls|can you|could you|would you|will you|let me|help me|i need you|i want you|"
                     r"i'd like you|go ahead|do it|do that|try)\b")
# Words a sentence opens with that carry nothing of its own: dropped from the front of what is kept.
OPENERS = re.compile(r"^\W*(?:(?:ok(?:ay)?|yes|yeah|yep|yup|sure|right|good|great|nice|fine|perfect|cool|lovely|fair|"
                     r"true|exactly|correct|makes sense|sounds good|got it|fine by me|"
                     r"brilliant|excellent|excelente|fantastic|amazing|agreed|alright|hmm+|ah+|oh|ugh|huh|so|and|"
                     r"also|btw|fyi|ps|by the way|heads up|fwiw|plus|anyway|well|hi|hey|hello|morning|sí|si|ja|oui|bom dia|hola|wait|one more "
                     r"(?:thing|rule)?(?: for the future)?|another rule|also another rule)\b[\s,.:;!—–-]*)+", I)
# The agent proposing something the user may take: "I'd ...", "we could ...", "Should I ...?", "Proposal:".
PROPOSAL = cue(r"\b(i'd (?!like|love|be\b|have|guess|say|think|imagine|expect|need)[a-z]+|i would|i suggest|i recommend|my suggestion|suggestion|we could|you could|"
                      r"proposal|proposed|the (?:usual|simplest|minimal|best) (?:shape|fix|option|way)|plan:|"
                      r"(?:should|shall) i|want me to|how about|one option|options?\b|the fix is|fix(?:es)?:|"
                      r"(?:two|three|both) fixes|would be to|i can(?!'t| ?not|\w)|i could)")
# An offer to do something now, rather than a choice to make: "Want me to look at ...?", "Should I patch it?"
OFFER = cue(r"\b(want me to|should i|shall i|i can|i could|i'll|let me|do you want)\b")
# The agent offering to act, not asking what holds or what the user wants ("Which layout do you want?" asks).
OFFER_TO_ACT = cue(r"\b(want me to|should i|shall i|i can|i could|i'll|let me|do you want me)\b")
# A proposal that points back to an earlier one: "as described", "what I said above".
POINTS_BACK = cue(r"\b(as (?:described|proposed|suggested|above|discussed)|like i said|the (?:above|same))\b")
# A question asking the agent for advice, whose answer is a proposal: "what would you do?", "options?".
ADVICE = cue(r"\b(what would|what about|look like|thoughts|what do you (?:suggest|think|recommend|propose)|how (?:do|should|would|can) "
                    r"(?:we|i)|how to|should (?:we|i)|options|what(?:'s| is) the (?:fix|best|right)|which (?:one|is "
                    r"better)|is it ok|would .* be better|what'?s your)\b")
# A proposal to fix the thing at hand: its acceptance is a step of the work, not a decision.
FIX_PROPOSAL = cue(r"\b(fix|bug|minimal|smallest|hotfix|patch|workaround|revert)\b")
# An acceptance of every part of a proposal: "do that, both", "all three".
EACH = cue(r"\b(both|all (?:three|four|of them|of it)|each|every one)\b")
# Where a proposal enumerates its parts: "(1) ... (2) ...", "1. ... 2. ...".
ENUMERATION = re.compile(r"(?:^|\s|;)\(?\d\)\s+|(?:^|\s)\d\.\s+(?=[A-Za-z`*])")
# The agent narrating what it is doing: never a memory, and no part of a proposal or a solution.
NARRATION = cue(r"^\W*(?:i'll|i will|i'm going to|i am going to|let me|let's see|now (?:a|the|i|for)|next|"
                       r"checking|running|reading|looking|fetching|pulling|trying|re-?running|deploying|opening|"
                       r"writing|adding|applying|watching|tracing|searching|pushing|merging|tagging|committing|"
                       r"measuring|starting|continuing|swapping|installing|making|switching|updating|moving|"
                       r"converting|creating|understood|noted|got it|ok|okay|sure|done|thanks|great|good)\b")
# A clause that only says when something else happens ("while the site is live", "once the terraform is merged"):
# an event it names has not happened; what it says is a condition, not a report.
CONDITION_CLAUSE = re.compile(r"\b(?:while|until|till|once|when|whenever|before|if|unless|as soon as)\b[^.,;:!?()]*",
                              re.I)


def main_clause(sentence: str) -> str:
    """The sentence without its clauses of condition or time (CONDITION_CLAUSE)."""
    return CONDITION_CLAUSE.sub(" ", sentence)


# The agent saying that something shipped (its own report after a deploy or a release).
SHIPPED = cue(r"^\W*(?:the )?[\w-]+(?: [\w-]+)? (?:is|are) (?:complete|finished)\b|"
              r"\b(fully rolled out|rolled out (?:to|on) prod\w*|(?:is|are|now) (?:live|in production)|"
                     r"production is (?:healthy|deployed|running)|released|deployed (?:to|on|in) prod\w*|is the first "
                     r"\w+|first [\w-]+ (?:service|release|deploy|pr)\b|published the release|"
                     r"first (?:prod\w*|live|real|full) (?:run|release|deploy\w*|import|migration|sync)\b[^.;]{0,20}\b"
                     r"(?:succeeded|finished|completed|passed|went through))|"
              r"^\W*(?:deployed|released|published|shipped|promoted|rolled out|tagged)\b(?:[^.;]|\.(?=\w)){0,80}"
              r"(?<![\w-])prod(?:uction)?(?![\w-])|^\W*tagged v?\d")
# The agent's report that a change it made removed the problem, said of the change: "the crash is gone since the
# store became an actor", "down 71% since the endpoints went in", "the fix holds on staging".
SINCE_CHANGE = r"since (?:the |we |it |they )?[\w`.-]+(?: [\w`.-]+){0,3} (?:became|went in|went out|landed|shipped|" \
               r"(?:was|were) (?:merged|deployed|added|changed|enabled|removed))\b"
# The agent stating the fix it made, not only that something passes.
FIXED = cue(r"^\W*with\b|^\W*(?:fixed and verified|verified|confirmed)\b(?=.*\b(?:because|cause|caused|came from|"
            r"never|so )\b)|\bnow (?!is\b|has\b|was\b)[a-z]+s\b|\b(fixed:|fix:|fixed by|" + SUMMARY_MARK +
            r"|to recap|recap|the (?:two )?fix(?:es)? (?:is|are|was|were|holds|held|works|worked)|" + SINCE_CHANGE + r"|"
                   r"(?:now|both) (?:uses?|stores?|selects?|goes|go|imports?|returns?|takes?|runs?)|with [^.]{3,60} "
                   r"(?:raised|enabled|fixed|set|switched)|switching to|switched to|changed to|moved to|replaced|"
                   r"instead of|her change|his change|the change)\b")
# The user taking what the agent proposed.
ACCEPT = re.compile(r"^\W*(?:(?:ok(?:ay)?|yes|yeah|yep|yup|sure|sí|si|ja|good|great|fine|perfect|agreed|right|"
                    r"correct|exactly|sounds good|makes sense|fair|ooh|nice|brilliant|lovely|excellent)\b[\s,.:;!—–-]*)+"
                    r"|^\W*(?:do (?:that|it|this|all|both|like this)|go (?:ahead|with (?:that|it|the|your))|let'?s do "
                    r"(?:that|it)|ship it|make (?:it|that) so|add that|suggest)\b", I)
# What an acceptance may say beyond its yes: "do that", "go ahead", "do like this", "good idea".
TAKE = re.compile(r"(?:(?:please|pls|then|and|so)\s+)*(?:do (?:that|it|this|all three|both|so|like this)|go ahead|go for it|"
                  r"let'?s do (?:that|it)|ship it|sounds good|good idea|makes sense|fair|agreed|go with (?:that|it)|"
                  r"that works|works for me|both|do that,? both|yes please|please|pls|like (?:this|that)|"
                  r"(?:this|that) we do|we(?:'ll)? do (?:this|that|it))"
                  r"(?:[\s,.!]+(?:good idea|both|please|pls|thanks|thx|go ahead))*", I)
# A line that says facts follow: "Facts you need:", "Context:", "Some background:".
FACTS_AHEAD = cue(r"\b(facts?|context|background|fyi|for reference|setup|our stack|the stack)\b")
# A line that says rules follow: "Style (from the comms team):", "Rules:", "Our conventions:".
RULES_AHEAD = cue(r"\b(style|rules?|conventions?|guidelines?|standards?|policy|policies)\b")
# An option turned down and nothing chosen in its place: "cdc is out", "No config then", "not adding Redis".
REJECTED = cue(r"^\W*(?:[\w-]+\s+){1,3}(?:is|are) out\b|^\W*no(?:\s+[\w-]+){0,2},?\s+then\b|^\W*not (?:adding|using|"
               r"exposing|doing|going with)\b")
REJECT = cue(r"^\W*(?:no|nope|nah|not\b|don't|never mind|nvm|scratch that)\b")
# Something that happened and marks the project's history.
DONE = cue(r"\b(released|shipped|launched|went live|is live|it'?s live|(?:is|are|now) (?:live|public|in "
                  r"production)|in production now|(?:fully )?rolled out|merged|deployed (?:to|on|in) prod\w*|"
                  r"(?:is|are|was|were) (?:finished|done|complete|completed|resolved|closed)|finished|completed|"
                  r"resolved|closes|closed|closing|migrated|cut over|first (?:pr|release|deploy)\b[^.]*done|"
                  r"(?:is|are) (?:the first|now the first)|first \w+ (?:service|pr|release) (?:built|deployed|merged)|"
                  r"matches|under the budget)\b")
# A check that a fix works: tests pass, a rollout is healthy, a load test held.
VERIFIED = cue(r"^\W*(?:fixed and )?verified\b|\b(pass(?:es|ed|ing)?|green|healthy|all good|works?\b|worked|fixed|fixes it|no longer|no more|stays?|"
                      r"(?:is|are) gone|no (?:crash|error|failure|inf|nan|timeout)\w*|(?:down|up) \d+(?:\.\d+)?\s?%|"
                      r"stayed|held|holds|normal|resolves|down from|instead of (?=[~\d])|now (?:uses|use|selects|stores|"
                      r"goes|import|imports|returns|takes|runs)|is clean|clean again|" + SUMMARY_MARK + r"|to recap|recap|"
                      r"brought|cut it|from \S+ to \S+|under the)\b")
# What caused a problem.
CAUSE = cue(r"\b(because|caused|came from|comes from|due to|that'?s the (?:leak|bug|problem|cause|issue)|"
                   r"the (?:root )?cause|the problem|which means|that explains|explains it|so (?:the|it|any|every)|"
                   r"is (?:that|because)|turns out|the (?:first|second) is|can'?t|cannot|couldn'?t|never|no "
                   r"(?:series|data|index)|doesn'?t|isn'?t|wasn'?t|without)\b")
# What went wrong: a failure, an error, a symptom.
PROBLEM = cue(r"\b(fail(?:s|ed|ing|ure)?|errors?|stopped|slow(?:er|ed)?|leak\w*|hang\w*|hung|block(?:s|ed)?|"
                     r"refused|timed? ?out|crash\w*|broke\w*|bug|flaky|stale|duplicat\w*|collid\w*|exceed\w*|"
                     r"too many|nan|404|500s?|oom\w*|unready|aborted|exhaust\w*|wrong|off by|doubled|can'?t "
                     r"resolve|couldn'?t|no longer|circular|doesn'?t (?:support|match|update|work))\b")
# What was done to fix it.
FIX = cue(r"\b(fix(?:ed|es)?|changed|change|switch(?:ed|ing)? to|moved?|moving|replac\w+|raised?|set|added|"
                 r"adding|now (?:uses|use|stores|selects)|instead of|rather than|with (?:the|a)\b|using|uses|"
                 r"enabled?|updated?|rebuilt|pinned|restored|restore)\b")
# A check's result, as a turn reporting one opens: "Staging is healthy on 8e41c7a", "Build and image jobs pass".
CHECKED = cue(r"\b(pass(?:es|ed)?|green|healthy|all good|succeed(?:s|ed)?|is clean)\b|^\W*re-?r[au]n\b")
# The agent saying what it changed: "Switched the workflow to ...", "Set `prepared_statements: false` ...".
APPLIED = cue(r"^\W*(?:switched|changed|set|added|moved|replaced|enabled|updated|pinned|raised|lowered|removed|"
              r"rebuilt|restored|bumped|rewrote|renamed|dropped)\b")
# A user's own note that a fix is worth keeping.
RECAP = cue(r"\b(for the record|note (?:that|this)|remember this(?=\s*[.:!,;]|\s*$)|remember that|good to know|is the (?:fix|answer|"
                   r"solution|trick)|was (?:just|only)|bit(?:ten)? us|writing (?:that|it) (?:in|down)|in my notes|"
                   r"lesson|so (?:for|the) \w+:|i will remember|i'll remember|when that happens again|next time)\b")
# A secret, or where one was: never in a memory.
SECRET = re.compile(r"\[redacted\]|\b(?:sk|pk|rk)[-_](?:live|test)[-_][A-Za-z0-9]{8,}|\bsk-[A-Za-z0-9]{20,}|"
                    r"\bAKIA[0-9A-Z]{16}\b|\bgh[pousr]_[A-Za-z0-9]{20,}|\bxox[abpr]-[A-Za-z0-9-]{10,}|"
                    r"://[^\s/:@]+:[^\s/@]+@|\b(?:password|passwd|pwd|secret|token|api[_-]?key)\s*[=:]\s*\S{6,}|"
                    r"-----BEGIN [A-Z ]*PRIVATE KEY", I)
# A long token of mixed letters and digits, as keys are; long words, paths and hashes of one kind are not.
KEYLIKE = re.compile(r"(?<![\w/.-])(?=[A-Za-z0-9_-]{32,}(?![\w/.-]))(?=[^\s]*[a-z])(?=[^\s]*[A-Z])(?=[^\s]*\d)"
                     r"[A-Za-z0-9_-]+")
# Lines that are pasted material, not something said: logs, a timeline, environment, commands, table rows.
PASTED = re.compile(r"^\s*(?:\$ |>>> |[A-Z][A-Z0-9_]{2,}=|\d{1,2}:\d\d(?::\d\d)?\s+\S|at [\w.$]+\(|Traceback|"
                    r"File \"|[{}\[\]]\s*$|\|.*\|\s*$)")
CODE_FENCE = re.compile(r"```.*?(?:```|\Z)", re.S)
THINKING = re.compile(r"<thinking>.*?(?:</thinking>|\Z)", re.S)
TOOL_LINE = re.compile(r"^\[tool(?: result)?: [^\n]*\]$", re.M)
TELLING = cue(r"\b(?:is|are|was|were|does|runs?|owns?|maintains?|uses?|has|have|holds?|lives?|lead|leads|"
                     r"manages?|starts?|arrive|arrives?|changes?|takes?|needs?|comes? from|goes|serves?|handles?|"
                     r"supports?|keeps?|moved|upgraded|joined|started|wrote|publishes|picks|renamed|deprecated|replaced|"
                     r"introduced)\b")
# The moment of speaking: "is slow now", "errors are gone", "the key is rotated" (a state, not a fact that lasts).
TRANSIENT_NOW = cue(r"\b(right now|at the moment|currently|again|still|so far|yet|today|this morning|earlier|gone|"
                    r"rotated|draining|backed up|hanging|sorry|lol|nvm|ugh|phew)\b|\bnow\s*[.!]?$")
FUTURE = cue(r"\b(will|'ll|going to|gonna)\b")
DATED = cue(r"\b((?:monday|tuesday|wednesday|thursday|friday|saturday|sunday)s?|weekends|next (?:week|month|year)|tomorrow|"
            r"\d{4}-\d\d-\d\d|\d{1,2} (?:jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec)\w*|end of)\b")
# A report of what is happening or happened, whose "always" or "never" is no rule: "the memory is growing always",
# "it's throwing 500s, everything that touches the DB", "never touched elixir before", "jenkins never used it".
# ("is nothing", "never need", "always seed" are no such report: a rule in the present stays a rule.)
HAPPENING = cue(r"\b(?:is|are|'s|'re|am|was|were)\s+(?:(?!(?:some|no|any|every)thing\b)\w+ing)\b|"
                r"(?<!\bis )(?<!\bare )(?<!\bbe )(?<!\bonly )\b(?:never|always|ever)\s+(?:\w+(?<!e)ed|did|had|was|were|been|ran|went|got|saw|knew|wrote|made|used)\b")
# What someone needs or wants done: the task at hand ("we need migrate X", "i want a plan"), not a fact.
WANTED = cue(r"\b(need|needs|want|wants|wanna|please|pls)\b")
# Someone's own start in the team: "I'm new on the team, started Monday as a backend engineer".
JOINED = cue(r"\b(i'?m new|started (?:on )?\w+ as|joined|i'?m the|i'?m a|i work (?:on|as|in))\b")
# Transient state of the moment: what is happening now, not what holds.
TRANSIENT = cue(r"\b(now|again|still|currently|at the moment|right now|earlier|just|yesterday|this morning|"
                       r"today|tonight|so far|already|sorry|slow|failing|failed|fails|broken|hanging|down|gone|"
                       r"draining|stuck|seeing|i see|looks? (?:good|like)|works?|worked|running)\b")
# What an instruction is for ("disable it so we don't deploy twice"): its purpose this time, not a reason that
# makes it a standing rule.
PURPOSE = cue(r"\bso (?:that )?(?:we|it|they|you|nobody|the|there)\b[^.;]*")
REASON = cue(r"\b(because|since|so that|as (?:the|our|we|it|they)|otherwise|that's how|which is why|"
                    r"it'?s (?:literally|what)|keeps?|they need|we need|needs?|so we|so it|so nobody|so the)\b|[—–]|"
                    r"\bcan(?:'t| ?not)\b")
PERSON = re.compile(r"(?<![.!?]\s)(?<!^)\b([A-Z][a-zà-ÿ]+)(?:'s)?\b")
CODEISH = re.compile(r"`[^`]+`|\b\w+(?:[._/:]\w+)+\b|\b\w*\d\w*\b|\b[a-z]+_[a-z_]+\b")
FIRST_SINGULAR = cue(r"\b(i|i'm|i've|i'll|i'd|me|my|mine|myself)\b")
FIRST_PLURAL = cue(r"\b(we|we're|we've|we'll|we'd|our|ours|us)\b")
QUESTION_LEAD = cue(r"^\W*(?:(?:what|why|how|when|where|who|which|any)\b|(?:do|does|did) (?:we|you|i|they|he|she|"
                    r"people|anyone|the|our|my|your)\b|(?:should|shall|can|could|would|will|is|are|was|were|isn't|"
                    r"aren't|am|have|has) (?:we|you|i|it|they|he|she|there|the|this|that|these|those|anyone|"
                    r"someone|our|my|your)\b)[^.!]*$")
# An instruction about the thing at hand: a verb whose object is "it", "that", "both" ("fix both", "set it").
AT_HAND = cue(r"^\W*(?:\w+\s+){0,2}?(?:\w+)\s+(?:it|that|this|them|those|these|both|everything|all of it)\b")
# A sentence about the thing at hand: "that's from ...", "it use a lot of space", "this is acceptable".
POINTING = cue(r"^\W*(?:it|this|that|these|those|which|there)(?:'s|\s+(?:is|was|were|are|use|uses|will|would|"
                      r"has|had|looks|seems|makes))\b")
# "It is GET /api/listings/search, ...", "that's `billing-api`": a sentence that points at the thing before it to
# name it (a path, an identifier, a name in capitals): what follows is a fact about that thing.
NAMES_IT = re.compile(r"^\W*(?:[Ii]t|[Tt]his|[Tt]hat)(?:'s|\s+is|\s+was)\s+(?:`|[\w-]*[/_.:]\w|[A-Z]{3,}\b)")
# A judgement of the moment rather than a fact: "nasty", "acceptable", "super helpful".
EVALUATIVE = cue(r"\b(good|nice|great|bad|nasty|important|acceptable|fine|helpful|slow|fast|weird|ugly|mess|"
                        r"easy|hard|simple|simpler|better|worse|enough|scary|neat|neater|cool|annoying|obviously|"
                        r"honestly|lol|ha|wow|ugh|phew|damn|blimey|crazy|fun|cute|sorry)\b")
# What holds beyond today: a scope word.
SCOPE = cue(r"\b(everywhere|every|all|whole|each|any|default|standard|until|always|never|from now on|going "
                   r"forward|in general|anymore|ever|only|policy|rule)\b|\bin \d+(?:\.\d+)*\b")
# A sentence that says the one before it was said already: "Same rule as I said.", "like I said", "as usual".
SAID_AGAIN = cue(r"\b(as i said|like i said|same rule|same as (?:before|always|last time)|as usual|as always|as "
                 r"(?:we|i) agreed)\b")
# The agent naming a rule the user set already ("That would break the one-hook-per-file rule you set earlier"):
# the user's answer keeps that rule, it does not make one.
NAMES_A_RULE = cue(r"\b(?:rule|convention|policy|standard) (?:you|we) (?:set|made|agreed|gave|chose)|\b(?:your|our) "
                   r"(?:own )?(?:rule|convention|policy)\b|\bthe rule you\b")
# A rule said again, not a new one: "remember, ...", "same rule as I said", "like I said".
RESTATED = cue(r"\b(remember|as i said|like i said|same rule|as usual|as the rule|as our rule|per the rule|per our "
               r"rule|as always)\b")
# Who owns or runs what: the facts about people a team keeps.
OWNER = cue(r"\b(owns?|maintains?|runs?|leads?|is (?:the|our) [\w ]{0,20}lead|wrote|in charge of|responsible for|"
                   r"'s (?:buddy|lead|manager))\b")
# Ownership said of a person: "she runs our SOC2 audit", "Nadia owns the cache layer", "he maintains packages/ui".
OWNED_BY = re.compile(r"\b(?:owns?|maintains?)\b|\b[A-Z][a-z]+ is (?:our|the team'?s) [\w-]+\b|\b(?:[Ss]he|[Hh]e|[A-Z][a-z]+)\s+(?:runs|leads|wrote|is (?:the|our) "
                      r"[\w ]{0,20}lead)\b")
PAST = cue(r"\b(was|were|did|had|\w{3,}ed)\b")
# Someone else's word passed on: "Ravi says", "Beatriz told me", "Wei confirmed".
REPORTED = re.compile(r"\b[A-Z][a-z]+ (?:says|said|told me|confirmed|mentioned|thinks|wants)\b")
LIST_ITEM = re.compile(r"^\s*(?:[-*+•]|\d+[.)]|\(\d+\))\s+")


@lru_cache(maxsize=1 << 14)
def has_secret(text: str) -> bool:
    """True when a text holds a secret or a redaction mark (a key, a password in a URL, `[redacted]`), or one that
    core/secrets.py would redact (a password said in words, in a session imported with --keep-secrets)."""
    return bool(SECRET.search(text) or KEYLIKE.search(text)) or redact(text)[1] > 0


@lru_cache(maxsize=1 << 12)
def said_text(text: str) -> str:
    """What a turn's speaker said in words: thinking, tool lines, code blocks and pasted logs left out."""
    text = THINKING.sub(" ", text)
    text = TOOL_LINE.sub("", text)
    text = CODE_FENCE.sub("\n", text)
    lines = [re.sub(r"^\s*>\s?", "", line) for line in text.splitlines()]
    return "\n".join(line for line in lines if not PASTED.match(line))


def opened(sentence: str) -> str:
    """The sentence without its openers ("ok.", "yes,", "also", "btw"), first letter kept as written."""
    rest = OPENERS.sub("", sentence, count=1).strip()
    return rest or sentence.strip()


@lru_cache(maxsize=1 << 14)
def is_asking(sentence: str) -> bool:
    """True for a question, with or without its question mark ("what's the fix, add the Z?", "how we verify")."""
    bare = sentence.rstrip(" \"')]”").strip()
    return bare.endswith("?") or bool(QUESTION_LEAD.match(opened(bare)) and len(bare.split()) < 16)


# A sentence that starts with a verb telling someone to do something.
IMPERATIVE = re.compile(r"^\W*(?:(?:and|also|then|now|so|just|please|pls|but)\s+)*(?:add|apply|ask|build|bump|change|"
                        r"check|clean|close|commit|continue|convert|create|delete|deploy|disable|do|document|drop|"
                        r"enable|extract|fix|flag|give|go|ignore|keep|leave|let|list|look|make|mark|mention|merge|"
                        r"move|note|open|pin|post|push|put|raise|read|rebuild|remove|rename|replace|rerun|restart|"
                        r"revert|rewrite|rotate|run|schedule|send|set|ship|show|skip|split|start|stop|suggest|switch|"
                        r"tag|tell|test|try|turn|update|upgrade|use|wait|write|comment|include|exclude|nuke|call|"
                        r"copy|find|get|help|bring|prepare|plan|review|retry|rollback|roll|watch|wire|sync|log)\b", re.I)
# Verbs a proposal starts with once its "I'd" is dropped ("freeze time with freezegun"), beyond the imperatives.
PROPOSED_VERB = re.compile(r"^(?:freeze|export|partition|alert|cap|limit|emit|expose|route|mirror|migrate|restructure|"
                           r"isolate|pass|wrap|guard|bundle|publish|rebase|squash|pair|introduce|adopt|replace|move|"
                           r"drop|pin|split|rebuild|restore|raise|lower|enable|disable)\b", re.I)


def imperative(sentence: str) -> bool:
    """True for a sentence that starts with a verb telling someone to do something ("fix both", "keep X")."""
    return bool(IMPERATIVE.match(sentence))
