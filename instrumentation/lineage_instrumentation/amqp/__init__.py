"""Lineage of AMQP 0-9-1 messaging shared by the pika and aio-pika instrumentors.

Both clients name messages the same way (``naming``), open the same runs for deliveries and
streams (``consumers``), record publishes the same way (``publisher``) and carry the same headers
(``lineage_instrumentation.propagation``), so a service on pika and one on aio-pika link into one
graph. The library packages only adapt their call signatures and channel events.
"""
