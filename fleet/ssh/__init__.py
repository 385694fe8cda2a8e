"""SSH: the one way fleet reaches a host.

Holds the connection (connect: ssh_config, jump hosts, strict host keys, the sandbox guard; heard: what a host
sent first, not SSH, or a banner and a stalled key exchange), ssh_config and known_hosts as OpenSSH reads them
(config, known_hosts), which keys are offered (auth), the keepalive watchdog,
commands run on a connected host with their deadline (remote; the fault harness's runner around them: faulty),
sudo for non-root operators (become, become_password), and files parsed once per content (filestamp).

May use: fleet.upstream and the primitives at fleet's top level (inventory, secretref, errors, ...).
"""
