"""The playbook of the router unit tests: replicas behind a router on sbx0 (port 30080), an API key by env."""

BOOK = """name: replicas
model: {path: /models/Llama-3.1-8B-Instruct}
serve: {host: 0.0.0.0, port: 30000, api_key: {env: SGLANG_API_KEY}}
ladder:
  - name: plain
router: {host: sbx0, port: 30080}
"""
