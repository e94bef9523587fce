"""The year simulation's parts: the world the agent mines facts from, the adversarial proposer, the naive applier
(the seed's original behaviour) and the ledger that measures which specifics survive."""
