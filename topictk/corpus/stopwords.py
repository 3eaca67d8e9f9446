"""topictk's English stop-word list: function words, pronouns, auxiliaries and the commonest
adverbs and discourse words, which carry no topical content."""
from __future__ import annotations

_WORDS = """
a about above across after afterwards again against ago all almost alone along already also
although always am among amongst an and another any anybody anyhow anyone anything anyway
anywhere are aren around as at away back be became because become becomes becoming been before
beforehand behind being below beside besides between beyond both but by can cannot could
couldn did didn do does doesn doing don done down during each either else elsewhere enough etc
even ever every everybody everyone everything everywhere except far few for former formerly
from further get gets getting give given gives go goes going gone got had hadn has hasn have
haven having he hence her here hereafter hereby herein hers herself him himself his how however
i if in indeed instead into is isn it its itself just keep kept last later latter least less
let like ll made make makes many may maybe me meanwhile might mine more moreover most mostly
much must my myself namely neither never nevertheless next no nobody none noone nor not nothing
now nowhere of off often on once one only onto or other others otherwise our ours ourselves out
over own per perhaps please put quite rather re really said same say says see seem seemed
seeming seems seen several shall she should shouldn since so some somebody somehow someone
something sometime sometimes somewhere still such than that the their theirs them themselves
then thence there thereafter thereby therefore therein thereupon these they this those though
through throughout thru thus to together too toward towards under until up upon us use used
uses using ve very via was wasn way we well were weren what whatever when whence whenever where
whereafter whereas whereby wherein whereupon wherever whether which while whither who whoever
whole whom whose why will with within without won would wouldn yet you your yours yourself
yourselves
"""

ENGLISH_STOPWORDS: frozenset[str] = frozenset(_WORDS.split())
