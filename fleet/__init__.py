"""fleet: deploy and tune sglang on fleets of GPU machines over SSH."""
