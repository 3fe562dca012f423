"""A tiny asyncio consumer service on aio-pika with no lineage code: it takes orders from a queue,
writes each into PostgreSQL (when DATABASE_URL is set) and acks it.

Run it under the wrapper to get lineage without touching it::

    lineage-instrument --exporters console python examples/aio_pika_consumer_service.py

Settings come from the environment: AMQP_URL, EXCHANGE (``orders``), ROUTING_KEY (``orders.*``),
QUEUE (``billing.orders``), COUNT (stop after this many messages, default 3), STYLE
(``callback``: ``queue.consume``; ``iterator``: ``async with queue.iterator()``), DATABASE_URL
(a PostgreSQL URL; the orders go into its table ``billed_orders``), READY_FILE (touched once
subscribed). With the psycopg instrumentor the table becomes the run's output by itself; with
only aio-pika instrumented, the run shows the queue's messages as its input.
"""

import asyncio
import json
import os
import pathlib
import sys

import aio_pika

URL = os.environ.get("AMQP_URL", "amqp://guest:guest@127.0.0.1:5672/%2F")
EXCHANGE = os.environ.get("EXCHANGE", "orders")
ROUTING_KEY = os.environ.get("ROUTING_KEY", "orders.*")
QUEUE = os.environ.get("QUEUE", "billing.orders")
COUNT = int(os.environ.get("COUNT", "3"))
STYLE = os.environ.get("STYLE", "callback")
DATABASE_URL = os.environ.get("DATABASE_URL")
READY_FILE = os.environ.get("READY_FILE")


async def prepare_table() -> None:
    if not DATABASE_URL:
        return
    import psycopg

    async with await psycopg.AsyncConnection.connect(DATABASE_URL) as db:
        await db.execute("CREATE TABLE IF NOT EXISTS billed_orders (id integer PRIMARY KEY)")


async def store(order: int) -> None:
    if not DATABASE_URL:
        return
    import psycopg

    async with await psycopg.AsyncConnection.connect(DATABASE_URL) as db:
        await db.execute("INSERT INTO billed_orders (id) VALUES (%s)", (order,))


async def main() -> int:
    handled: list[int] = []
    done = asyncio.Event()
    await prepare_table()
    connection = await aio_pika.connect(URL)
    async with connection:
        channel = await connection.channel()
        exchange = await channel.declare_exchange(EXCHANGE, aio_pika.ExchangeType.TOPIC)
        queue = await channel.declare_queue(QUEUE)
        await queue.bind(exchange, ROUTING_KEY)

        async def on_order(message: aio_pika.abc.AbstractIncomingMessage) -> None:
            async with message.process():
                order = json.loads(message.body)["order"]
                await store(order)
                handled.append(order)
                if len(handled) >= COUNT:
                    done.set()

        if STYLE == "iterator":
            async with queue.iterator() as orders:
                if READY_FILE:
                    pathlib.Path(READY_FILE).touch()
                async for message in orders:
                    await on_order(message)
                    if done.is_set():
                        break
        else:
            tag = await queue.consume(on_order)
            if READY_FILE:
                pathlib.Path(READY_FILE).touch()
            await asyncio.wait_for(done.wait(), 30)
            await queue.cancel(tag)
    print(f"billed orders {sorted(handled)}")
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
