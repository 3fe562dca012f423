"""Lineage that watches (issue 34): causes noticed in stored events, alerts sent to webhooks.

The write path notices causes (:mod:`.causes`, pure) and records them in the
:class:`~lineage_sdk.collector.watch.store.WatchStore` in one transaction; a worker
(:mod:`.worker`) resolves them into alerts (impact, rules, CloudEvents) and delivers them
(:mod:`.deliver`), so a slow receiver never holds up ingest and a restart loses nothing.
"""
