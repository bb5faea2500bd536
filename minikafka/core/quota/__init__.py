"""Quotas, as plain decisions: the sensors and their stats (Kafka's Metrics `Sensor`,
`SimpleRate`, `Rate`), the replication throttle's classes and planner (KIP-73, KAFKA-4313,
KIP-542, KIP-1009), what a fetch response is charged, and the client throttle gate (KIP-13,
KIP-219). docs/throttling.md says what each decides."""
