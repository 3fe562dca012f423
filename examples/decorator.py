"""The README's first way of use: a decorated function whose runs are published to RabbitMQ.

Configured through the environment, as the README's second way shows::

    export LINEAGE_EXPORTERS=rabbitmq
    export LINEAGE_RABBITMQ_URL=amqp://guest:guest@127.0.0.1:5672/%2F
    python examples/decorator.py

One call of ``load_orders`` emits START and COMPLETE; the COMPLETE names both outputs. CI runs
this file from a virtualenv holding only the built wheel (scripts/package_smoke.py).
"""

import sys

import lineage_sdk
from lineage_sdk import LineageDataset, current_run, track_lineage


@track_lineage(
    job_name="load_orders",
    inputs=[LineageDataset("postgres://db:5432", "shop.public.orders")],
    outputs=[LineageDataset("s3://lake", "orders/daily")],
)
def load_orders() -> None:
    current_run().add_output(LineageDataset("s3://lake", "orders/extra"))  # found at run time


if __name__ == "__main__":
    load_orders()
    # Events leave on a background thread; wait for them before the process ends.
    flushed = lineage_sdk.force_flush(timeout=30)
    print(f"load_orders ran; lineage flushed: {flushed}")
    sys.exit(0 if flushed else 1)
