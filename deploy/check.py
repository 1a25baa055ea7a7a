#!/usr/bin/python3
"""Checks deploy/'s manifests without a cluster.

usage: check.py DEPLOY_DIR RINGMASTER_BINARY

- every document parses and names its apiVersion, kind and metadata (strings,
  so YAML 1.1 surprises such as `namespace: y` -> true are caught);
- kustomization.yaml lists exactly the manifests of the folder;
- the references hold: service account, config maps, volumes, ports;
- kube-scheduler's extender stanza points at the port ringmaster serves on,
  with the verbs ringmaster answers, and ringmaster binds through the
  kubectl-proxy port;
- the extender listens on loopback only (--http 127.0.0.1 or ::1): nothing
  outside the pod may call filter or bind; /healthz and /metrics have a port
  of their own (--metrics), the only one a container port names, the probes
  use and a Service exposes;
- serve keeps its journal (--state) on a writable volume of its container;
- every flag given to `ringmaster serve` is one it knows (its --help), and
  the policy ConfigMap passes `ringmaster policy check` and is the built-in
  policy, byte for byte (`ringmaster policy default`).
Prints each problem with its file and exits 1 if there is any.
"""
import os
import re
import subprocess
import sys
import tempfile
import urllib.parse

import yaml

NAMESPACED = {"ServiceAccount", "ConfigMap", "Deployment", "Service", "RoleBinding", "Role"}
problems = []


def problem(where, what):
    problems.append(f"{where}: {what}")


def load(folder):
    docs = []
    for name in sorted(os.listdir(folder)):
        if not name.endswith(".yaml") or name == "kustomization.yaml":
            continue
        path = os.path.join(folder, name)
        try:
            with open(path) as f:
                for i, doc in enumerate(yaml.safe_load_all(f)):
                    if doc is not None:
                        docs.append((f"{name} document {i + 1}", name, doc))
        except yaml.YAMLError as e:
            problem(name, f"does not parse: {e}")
    return docs


def check_shape(where, doc):
    for key in ("apiVersion", "kind"):
        if not isinstance(doc.get(key), str):
            problem(where, f"{key} must be a string, got {doc.get(key)!r}")
    meta = doc.get("metadata")
    if not isinstance(meta, dict) or not isinstance(meta.get("name"), str):
        problem(where, "metadata.name must be a string")
        return
    ns = meta.get("namespace")
    if doc.get("kind") in NAMESPACED and (not isinstance(ns, str) or ns in ("y", "Y", "n", "N")):
        # PyYAML reads y/n as strings; kubectl's YAML 1.1 reader as booleans.
        problem(where, f"metadata.namespace must be a string, got {ns!r}")


def flag_value(args, flag):
    for a in args:
        if a.startswith(flag + "="):
            return a.split("=", 1)[1]
    for i, a in enumerate(args[:-1]):
        if a == flag:
            return args[i + 1]
    return None


def port_of(address):
    return int(address.rsplit(":", 1)[1])


LOOPBACK = ("127.0.0.1", "localhost", "::1", "[::1]")


def host_of(address):
    return address.rsplit(":", 1)[0] or "127.0.0.1"


def main():
    if len(sys.argv) != 3:
        print(__doc__)
        return 2
    folder, binary = sys.argv[1], sys.argv[2]
    docs = load(folder)
    for where, _, doc in docs:
        check_shape(where, doc)
    by_kind = {}
    for where, name, doc in docs:
        if isinstance(doc.get("metadata"), dict):
            by_kind.setdefault(doc.get("kind"), {})[doc["metadata"].get("name")] = (where, doc)

    # kustomization lists exactly the folder's manifests.
    with open(os.path.join(folder, "kustomization.yaml")) as f:
        listed = set(yaml.safe_load(f).get("resources", []))
    present = {n for n in os.listdir(folder) if n.endswith(".yaml") and n != "kustomization.yaml"}
    for n in sorted(present - listed):
        problem("kustomization.yaml", f"does not list {n}")
    for n in sorted(listed - present):
        problem("kustomization.yaml", f"lists {n}, which is not in the folder")

    deployments = by_kind.get("Deployment", {})
    if "ringmaster" not in deployments:
        problem("deploy", "no Deployment named ringmaster")
        return report()
    where, dep = deployments["ringmaster"]
    pod = dep["spec"]["template"]["spec"]
    sa = pod.get("serviceAccountName")
    if sa not in by_kind.get("ServiceAccount", {}):
        problem(where, f"serviceAccountName {sa!r} is not defined")
    for kind in ("ClusterRoleBinding", "RoleBinding"):
        for bwhere, b in by_kind.get(kind, {}).values():
            for s in b.get("subjects", []):
                if s.get("kind") == "ServiceAccount" and s.get("name") not in by_kind.get("ServiceAccount", {}):
                    problem(bwhere, f"subject {s.get('name')!r} is not a defined service account")
    rules = by_kind.get("ClusterRole", {}).get("ringmaster", (None, {}))[1].get("rules", [])
    if not any("pods/binding" in r.get("resources", []) and "create" in r.get("verbs", []) for r in rules):
        problem("rbac.yaml", "ClusterRole ringmaster must allow create on pods/binding")
    volumes = {v["name"]: v for v in pod.get("volumes", [])}
    for v in volumes.values():
        cm = v.get("configMap", {}).get("name")
        if cm is not None and cm not in by_kind.get("ConfigMap", {}):
            problem(where, f"volume {v['name']} uses ConfigMap {cm!r}, which is not defined")
    containers = {c["name"]: c for c in pod.get("containers", [])}
    for c in containers.values():
        for m in c.get("volumeMounts", []):
            if m["name"] not in volumes:
                problem(where, f"container {c['name']} mounts undefined volume {m['name']}")
    rm = containers.get("ringmaster")
    if rm is None:
        problem(where, "no container named ringmaster")
        return report()
    args = [str(a) for a in rm.get("args", [])]
    if not args or args[0] != "serve":
        problem(where, "the ringmaster container must run `serve`")
    # Every flag is one `ringmaster serve` knows.
    help_text = subprocess.run([binary, "serve", "--help"], capture_output=True, text=True).stdout
    known = set(re.findall(r"(--[a-z][a-z0-9-]*)", help_text))
    for a in args[1:]:
        if a.startswith("--") and a.split("=", 1)[0] not in known:
            problem(where, f"ringmaster serve has no flag {a.split('=', 1)[0]}")
    http = flag_value(args, "--http")
    if http is None:
        problem(where, "ringmaster serve needs --http (the extender's address)")
    elif host_of(http) not in LOOPBACK:
        problem(where, f"the extender must listen on loopback (--http 127.0.0.1:PORT), not {http}: "
                       "kube-scheduler calls it inside the pod, and anyone who reaches it can place and bind")
    metrics = flag_value(args, "--metrics")
    if metrics is None:
        problem(where, "ringmaster serve needs --metrics HOST:PORT (the health port probes and the Service use)")
    # The journal: --state on a writable volume of the container (without it
    # a restart forgets gangs, bindings and cancels).
    state = flag_value(args, "--state")
    if state is None:
        problem(where, "ringmaster serve needs --state DIR (its journal), on a mounted volume")
    else:
        mounted = {m["mountPath"].rstrip("/"): m for m in rm.get("volumeMounts", [])}
        m = mounted.get(state.rstrip("/"))
        if m is None:
            problem(where, f"--state {state} is not the mountPath of a volume of the ringmaster container")
        elif m.get("readOnly") or "configMap" in volumes.get(m["name"], {}):
            problem(where, f"--state {state} must be a writable volume (not read-only, not a ConfigMap)")
    # The container ports: only the health port, never the extender's.
    cports = {}
    for p in rm.get("ports", []):
        cports[p.get("name")] = p.get("containerPort")
        if http is not None and p.get("containerPort") == port_of(http):
            problem(where, f"containerPort {p.get('containerPort')} is the extender's --http port: do not publish it")
        if metrics is not None and p.get("containerPort") != port_of(metrics):
            problem(where, f"containerPort {p.get('containerPort')} is not ringmaster's --metrics port {port_of(metrics)}")
    for probe in ("readinessProbe", "livenessProbe"):
        port = rm.get(probe, {}).get("httpGet", {}).get("port")
        number = cports.get(port, port)
        if metrics is not None and number != port_of(metrics):
            problem(where, f"{probe} uses port {port}, not the --metrics port {port_of(metrics)}")
    # The extender stanza points at ringmaster.
    swhere, scm = by_kind.get("ConfigMap", {}).get("ringmaster-scheduler-config", (None, None))
    if scm is None:
        problem("deploy", "no ConfigMap ringmaster-scheduler-config")
    else:
        cfg = yaml.safe_load(scm["data"]["scheduler-config.yaml"])
        if cfg.get("kind") != "KubeSchedulerConfiguration":
            problem(swhere, "scheduler-config.yaml is not a KubeSchedulerConfiguration")
        names = [p.get("schedulerName") for p in cfg.get("profiles", [])]
        if "ringmaster" not in names:
            problem(swhere, "no profile with schedulerName ringmaster")
        exts = cfg.get("extenders", [])
        if len(exts) != 1:
            problem(swhere, f"expected one extender, got {len(exts)}")
        for e in exts:
            url = urllib.parse.urlparse(e.get("urlPrefix", ""))
            if http is not None and url.port != port_of(http):
                problem(swhere, f"extender urlPrefix port {url.port} is not ringmaster's --http port {port_of(http)}")
            if url.hostname not in ("127.0.0.1", "localhost"):
                problem(swhere, "the extender is reached on the pod's loopback (127.0.0.1)")
            for verb in ("filter", "prioritize", "preempt", "bind"):
                if e.get(verb + "Verb") != verb:
                    problem(swhere, f"{verb}Verb must be {verb!r}")
            if e.get("nodeCacheCapable") and flag_value(args, "--cluster") is None:
                problem(swhere, "nodeCacheCapable: true needs ringmaster's --cluster FILE")
    # ringmaster binds through kubectl proxy.
    api = flag_value(args, "--api-server")
    proxy = containers.get("kubectl-proxy")
    if api is not None and api != "in-cluster":
        if proxy is None:
            problem(where, "--api-server is given but there is no kubectl-proxy container")
        else:
            pport = flag_value(proxy.get("command", []), "--port")
            if pport is None or int(pport) != urllib.parse.urlparse(api).port:
                problem(where, f"--api-server {api} does not match kubectl proxy's --port {pport}")
    # The policy passes `ringmaster policy check`.
    policy = flag_value(args, "--policy")
    if policy is not None:
        mount_dir, key = os.path.split(policy)
        mounts = {m["mountPath"]: m["name"] for m in rm.get("volumeMounts", [])}
        vol = volumes.get(mounts.get(mount_dir, ""), {})
        cm = vol.get("configMap", {}).get("name")
        pwhere, pcm = by_kind.get("ConfigMap", {}).get(cm, (None, None))
        if pcm is None or key not in pcm.get("data", {}):
            problem(where, f"--policy {policy} is not a key of a mounted ConfigMap")
        else:
            with tempfile.NamedTemporaryFile("w", suffix=".yaml", delete=False) as f:
                f.write(pcm["data"][key])
            r = subprocess.run([binary, "policy", "check", f.name], capture_output=True, text=True)
            os.unlink(f.name)
            if r.returncode != 0:
                problem(pwhere, f"policy check failed: {r.stdout}{r.stderr}".strip())
            # One default policy: the ConfigMap's is the built-in one, byte
            # for byte (examples/policies/ringmaster.yaml, compiled in).
            d = subprocess.run([binary, "policy", "default"], capture_output=True, text=True)
            if d.returncode != 0 or d.stdout != pcm["data"][key]:
                problem(pwhere, f"{key} is not `ringmaster policy default` (examples/policies/ringmaster.yaml): "
                        "the deployed default must be the built-in one (add queues to a copy of your own)")
    # The Service targets a port the container has, and only the health port.
    for vwhere, svc in by_kind.get("Service", {}).values():
        named = {p.get("name"): p.get("containerPort") for c in containers.values() for p in c.get("ports", [])}
        for p in svc["spec"].get("ports", []):
            target = p.get("targetPort", p.get("port"))
            if isinstance(target, str) and target not in named:
                problem(vwhere, f"targetPort {target} is no container port's name")
                continue
            number = named.get(target, target)
            if http is not None and number == port_of(http):
                problem(vwhere, f"the Service exposes port {number}, the extender's --http port")
            elif metrics is not None and number != port_of(metrics):
                problem(vwhere, f"the Service exposes port {number}, not only the --metrics port {port_of(metrics)}")
    return report()


def report():
    for p in problems:
        print(p, file=sys.stderr)
    if problems:
        return 1
    print("deploy: manifests consistent")
    return 0


if __name__ == "__main__":
    sys.exit(main())
