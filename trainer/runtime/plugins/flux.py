"""Flux plugin (docs/behaviour/trainer.md §12.11, level v2.3 only): the Flux Framework workload
manager installed into the trainer's ``node`` pods, wrapping the TrainJob's command.

Why: Flux runs one broker per pod; the brokers find each other through a generated TOML
config (hosts ``<trainjob>-node-0-[0-N]`` behind the JobSet's headless service) and trust each
other through one CURVE certificate. An init container copies a Flux "view" (a spack install)
into shared volumes, and the node container's command becomes the plugin's entrypoint, which
starts the brokers and has the lead broker ``flux run`` the original command on every node.
What the plugin builds is upstream v2.3.0's ``plugins/flux`` byte for byte: the scripts
(``init.sh``, ``entrypoint.sh``, the broker config) are its embedded templates, the certificate
its derivation from the TrainJob's uid (so every reconcile applies the same key).

The TrainJob's command is rewritten on the plugin's private copy of the TrainJob (the JobSet
builder then writes it), never on the stored object. Broker settings come from the
``FLUX_VIEW_IMAGE``, ``FLUX_NETWORK_DEVICE`` and ``FLUX_QUEUE_POLICY`` env of the runtime's
node container, the TrainJob's ``spec.trainer.env`` winning. PlainML still runs for Flux
runtimes at v2.3.0 (count and env of the TrainJob).
"""

from __future__ import annotations

import base64
import hashlib

from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey
from pydantic import ValidationError

from manager.meta.field import FieldError
from manager.meta.object import Json
from trainer.api import trainer_constants as tc
from trainer.api.trainer_v1alpha1 import Trainer, TrainJob
from trainer.api.v2_3.trainer_v1alpha1 import FluxMLPolicySource
from trainer.runtime.apply import upsert_volume_mounts, upsert_volumes
from trainer.runtime.errors import RuntimeFailure
from trainer.runtime.info import ContainerInfo, Info
from trainer.runtime.objects import CONFIGMAP_GVK, SECRET_GVK, name_of, namespace_of, owner_reference
from trainer.runtime.plugins.base import PluginContext, Watch
from trainer.runtime.plugins.watches import by_controller_owner
from trainer.runtime.resources import gpu_count, trainer_resources_from_runtime

__all__ = [
    "Flux",
    "broker_settings",
    "curve_certificate",
    "encode_z85",
    "flux_policy",
    "host_range",
    "hostlist",
    "original_command",
]

# v2.3.0's pkg/constants (Flux Framework).
FLUX_INSTALLER_IMAGE = "ghcr.io/converged-computing/flux-view-ubuntu:tag-jammy"
FLUX_NETWORK_DEVICE = "eth0"
FLUX_QUEUE_POLICY = "fcfs"
INSTALLER_CONTAINER = "flux-installer"
INSTALL_VOLUME = "flux-install"
INSTALL_PATH = "/mnt/flux"
CONFIG_PATH = "/etc/flux-config"
"""Where the entrypoint ConfigMap is mounted (upstream's ``FluxConfigVolumeName``, a path)."""
CURVE_VOLUME = "flux-curve"
CURVE_PATH = "/curve"
MEMORY_VOLUME = "shared-memory"
MEMORY_PATH = "/dev/shm"
SPACK_VOLUME = "spack-install"
SPACK_PATH = "/opt/software"
ENTRYPOINT_SUFFIX = "-flux-entrypoint"
CURVE_SUFFIX = "-flux-curve"
CURVE_CERT_KEY = "curve.cert"
ENTRYPOINT_KEY = "entrypoint.sh"
INIT_KEY = "init.sh"
CONFIG_MAP_MODE = 0o755
CURVE_MODE = 0o400
FLUX_ROOT = "/opt/view"
"""Where the view images keep their Flux install (converged-computing/flux-views)."""

BROKER_DEFAULTS = {
    "FLUX_VIEW_IMAGE": FLUX_INSTALLER_IMAGE,
    "FLUX_NETWORK_DEVICE": FLUX_NETWORK_DEVICE,
    "FLUX_QUEUE_POLICY": FLUX_QUEUE_POLICY,
}
"""The settings an env var of the node container or the TrainJob may override, by name."""

GO_SPACE = "\t\n\v\f\r \x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200a\u2028\u2029\u202f\u205f\u3000"
"""Go's ``unicode.IsSpace`` set, which ``strings.TrimSpace`` strips (Python's ``str.strip``
also strips U+001C..U+001F)."""

Z85_ALPHABET = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ.-:+=^!/*?&<>()[]{}@%$#"

# The templates upstream embeds (plugins/flux/templates), verbatim: their output is compared
# byte for byte, so they are data, not code of ours. Each ``%s`` is filled in order.
BROKER_TEMPLATE = """\
[access]
allow-guest-user = true
allow-root-owner = true

# Point to resource definition generated with flux-R(1).
[resource]
path = "/mnt/flux/config/etc/flux/system/R"

[bootstrap]
curve_cert = "/mnt/flux/config/etc/curve/curve.cert"
default_port = 8050
default_bind = "%s"
default_connect = "%s"
hosts = [
{ host="%s"},
]

[archive]
dbpath = "/mnt/flux/config/var/lib/flux/job-archive.sqlite"
period = "1m"
busytimeout = "50s"

[sched-fluxion-qmanager]
queue-policy = "%s"
"""

INIT_TEMPLATE = """\
# Copyright The Kubeflow Authors.
#
# Licensed under the Apache License, Version 2.0 (the "License");
# you may not use this file except in compliance with the License.
# You may obtain a copy of the License at
#
#     http://www.apache.org/licenses/LICENSE-2.0
#
# Unless required by applicable law or agreed to in writing, software
# distributed under the License is distributed on an "AS IS" BASIS,
# WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
# See the License for the specific language governing permissions and
# limitations under the License.

#!/bin/sh
fluxroot=%s
mainHost=%s

# We need to "install" config assets separately. We may not have write to /opt/view.
installRoot=/mnt/flux/config
echo "Hello I am hostname $(hostname) running setup."

# Always use verbose, no reason to not here
echo "Flux install root: ${fluxroot}"
export fluxroot

# Add flux to the path (if using view)
export PATH=/opt/view/bin:$PATH

# If the view doesn't exist, ensure basic paths do
mkdir -p $fluxroot/bin

# Cron directory
mkdir -p $installRoot/etc/flux/system/cron.d
mkdir -p $installRoot/var/lib/flux

# These actions need to happen on all hosts
mkdir -p $installRoot/etc/flux/system
hosts="%s"

# Echo hosts here in case the main container needs to generate
echo "${hosts}" > ${installRoot}/etc/flux/system/hostlist

# Write the broker configuration
mkdir -p ${installRoot}/etc/flux/config
cat <<EOT >> ${installRoot}/etc/flux/config/broker.toml
%s
EOT

echo
echo "🐸 Broker Configuration"
cat ${installRoot}/etc/flux/config/broker.toml

# The rundir needs to be created first, and owned by user flux
# Along with the state directory and curve certificate
mkdir -p ${installRoot}/run/flux ${installRoot}/etc/curve

viewroot=/mnt/flux
mkdir -p $viewroot/view

# Now prepare to copy finished spack view over
echo "Moving content from /opt/view to be in shared volume at $viewroot"
# Note that /opt/view is a symlink to here
view=$(ls /opt/views/._view/)
view="/opt/views/._view/${view}"

# We have to move both of these paths - spack makes link to /opt/software
# /opt/software will need to be restored in application container
cp -R ${view}/* $viewroot/view
cp -R /opt/software $viewroot/

# This is a marker to indicate the copy is done
touch $viewroot/flux-operator-done.txt
echo "Application is done."
"""

ENTRYPOINT_TEMPLATE = """\
# Copyright The Kubeflow Authors.
#
# Licensed under the Apache License, Version 2.0 (the "License");
# you may not use this file except in compliance with the License.
# You may obtain a copy of the License at
#
#     http://www.apache.org/licenses/LICENSE-2.0
#
# Unless required by applicable law or agreed to in writing, software
# distributed under the License is distributed on an "AS IS" BASIS,
# WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
# See the License for the specific language governing permissions and
# limitations under the License.

#!/bin/sh

fluxuser=$(whoami)
fluxuid=$(id -u $fluxuser)

# Ensure spack view is on the path, wherever it is mounted
viewbase="/mnt/flux"
viewroot=${viewbase}/view
configroot=${viewbase}/config
software="${viewbase}/software"
viewbin="${viewroot}/bin"
fluxpath=${viewbin}/flux

# Important to add AFTER in case software in container duplicated (e.g., Python)
export PATH=$PATH:${viewbin}

# Copy mount software to /opt/software
cp -R ${viewbase}/software/* /opt/software/

# Flux should use the Python with its install
foundroot=$(find $viewroot -maxdepth 2 -type d -path $viewroot/lib/python3*) > /dev/null 2>&1
pythonversion=$(basename ${foundroot})
pythonversion=${viewroot}/bin/${pythonversion}
echo "Python version: $pythonversion"
echo "Python root: $foundroot"

# If we found the right python, ensure it's linked (old link does not work)
if [[ -f "${pythonversion}" ]]; then
   rm -rf $viewroot/bin/python3
   rm -rf $viewroot/bin/python
   ln -s ${pythonversion} $viewroot/lib/python  || true
   ln -s ${pythonversion} $viewroot/lib/python3 || true
fi

# Ensure we have flux's python on the path
export PYTHONPATH=${PYTHONPATH:-""}:${foundroot}/site-packages
export FLUX_RC_EXTRA=$viewroot/etc/flux/rc1.d

# Write a script to load fluxion
cat <<EOT >> /tmp/load-fluxion.sh
flux module remove sched-simple
flux module load sched-fluxion-resource
flux module load sched-fluxion-qmanager
EOT
mv /tmp/load-fluxion.sh ${viewbase}/load-fluxion.sh

# Write an easy file we can source for the environment
cat <<EOT >> /tmp/flux-view.sh
#!/bin/bash
export PATH=$PATH
export PYTHONPATH=$PYTHONPATH
export LD_LIBRARY_PATH=${LD_LIBRARY_PATH:-""}:$viewroot/lib
export fluxsocket=local://${configroot}/run/flux/local
EOT
mv /tmp/flux-view.sh ${viewbase}/flux-view.sh

# Variables we can use again
cfg="${configroot}/etc/flux/config"
command="$@"

# Copy mounted curve to expected location
curvepath=/mnt/flux/config/etc/curve/curve.cert
cp /curve/curve.cert ${curvepath}

# Remove group and other read
chmod o-r ${curvepath}
chmod g-r ${curvepath}
chown -R ${fluxuid} ${curvepath}

# Generate host resources
hosts=$(cat ${configroot}/etc/flux/system/hostlist)
flux R encode --hosts=${hosts} %s > /tmp/R
mv /tmp/R ${configroot}/etc/flux/system/R

# Put the state directory in /var/lib on shared view
export STATE_DIR=${configroot}/var/lib/flux
export FLUX_OUTPUT_DIR=/tmp/fluxout
mkdir -p ${STATE_DIR} ${FLUX_OUTPUT_DIR}

# Main host <name>-0 and the fully qualified domain name
mainHost="%s"
workdir=$(pwd)

# Make cron.d directory
mkdir -p ${configroot}/etc/flux/system/cron.d
brokerOptions="-Scron.directory=${configroot}/etc/flux/system/cron.d \\
  -Stbon.fanout=256 \\
  -Srundir=${configroot}/run/flux  \\
  -Sstatedir=${STATE_DIR} -Slocal-uri=local://$configroot/run/flux/local \\
  -Slog-stderr-level=0  \\
  -Slog-stderr-mode=local"

# Run an interactive cluster, giving no command to flux start
run_interactive_cluster() {
    echo "🌀 flux broker --config-path ${cfg} ${brokerOptions}"
    flux broker --config-path ${cfg} ${brokerOptions}
}

# Start flux with the original entrypoint
if [ "$(hostname)" = "${mainHost}" ]; then

  echo "Command provided is: ${command}"
  if [ -z "${command}" ]; then
    run_interactive_cluster
  else

    # If tasks are == 0, then only define nodes
    flags="%s  "
    echo "Flags for flux are ${flags}"
    echo "🌀 flux start  -o --config ${cfg} ${brokerOptions} flux submit ${flags} --quiet --watch ${command}"
\tflux start  -o --config ${cfg} ${brokerOptions} flux run ${flags} ${command}
  fi

# Block run by workers
else

    # We basically sleep/wait until the lead broker is ready
    echo "🌀 flux start  -o --config ${configroot}/etc/flux/config ${brokerOptions}"

    # We can keep trying forever, don't care if worker is successful or not
    # Unless retry count is set, in which case we stop after retries
    while true
    do
        flux start -o --config ${configroot}/etc/flux/config ${brokerOptions}
        retval=$?
        if [[ "${retval}" -eq 0 ]] || [[ "false" == "true" ]]; then
             echo "The follower worker exited cleanly. Goodbye!"
             break
        fi
        echo "Return value for follower worker is ${retval}"
        echo "😪 Sleeping 15s to try again..."
        sleep 15
    done
fi

# Marker of completion, if needed
touch $viewbase/flux-operator-complete.txt
"""


def _fill(template: str, *values: str) -> str:
    """Go's ``fmt.Sprintf`` for a template of ``%s`` verbs only (values are not re-read)."""
    parts = template.split("%s")
    if len(parts) != len(values) + 1:
        raise ValueError(f"template has {len(parts) - 1} %s verbs, {len(values)} values given")
    out = [parts[0]]
    for value, part in zip(values, parts[1:], strict=True):
        out += [value, part]
    return "".join(out)


def flux_policy(info: Info | None) -> FluxMLPolicySource | None:
    """The runtime's ``mlPolicy.flux`` (a v2.3 field riding in the v2.1 model's extras), typed."""
    policy = info.runtime_policy.ml_policy if info is not None else None
    raw = (policy.model_extra or {}).get("flux") if policy is not None else None
    if raw is None:
        return None
    try:
        return FluxMLPolicySource.from_dict(raw)
    except (ValidationError, ValueError, TypeError) as err:
        raise RuntimeFailure(f"invalid mlPolicy.flux of the runtime: {err}") from err


def _trainer(trainjob: TrainJob) -> Trainer:
    """``spec.trainer``, which upstream dereferences for a Flux runtime (a panic there)."""
    trainer = trainjob.spec.trainer if trainjob.spec is not None else None
    if trainer is None:
        raise RuntimeFailure(
            "spec.trainer: Required value: a TrainJob on a Flux runtime needs spec.trainer",
            [FieldError.required("spec.trainer", "a TrainJob on a Flux runtime needs spec.trainer")],
        )
    return trainer


def _int_proc_per_node(trainer: Trainer) -> int | None:
    """``spec.trainer.numProcPerNode``: an int32 at v2.3 (the v2.1 model also admits a string)."""
    value = trainer.num_proc_per_node
    if value is None or isinstance(value, int):
        return value
    raise RuntimeFailure(
        f"spec.trainer.numProcPerNode: Invalid value: {value!r}: must be an integer for a Flux TrainJob",
        [FieldError.invalid("spec.trainer.numProcPerNode", value, "must be an integer for a Flux TrainJob")],
    )


def broker_settings(trainer: Trainer, info: Info) -> dict[str, str]:
    """``BROKER_DEFAULTS`` overridden by the runtime's node container env, then the TrainJob's.

    A runtime env var counts only with a non-empty ``value`` (Go's typed round trip drops an
    empty one); a TrainJob env var of that name always wins, even empty or a ``valueFrom``."""
    settings = dict(BROKER_DEFAULTS)
    container = info.find_container_by_pod_set_ancestor_container_name(tc.AncestorTrainer, tc.Node)
    for env in container.env if container is not None else ():
        name, value = env.get("name"), env.get("value")
        if name in settings and isinstance(value, str) and value:
            settings[name] = value
    for env in trainer.env or ():
        name = env.get("name")
        if name in settings:
            settings[name] = env.get("value") or ""
    return settings


def original_command(trainer: Trainer, info: Info) -> str:
    """The command Flux runs: the runtime node container's command, or the TrainJob's, then the
    TrainJob's args, joined by spaces and trimmed."""
    container = info.find_container_by_pod_set_ancestor_container_name(tc.AncestorTrainer, tc.Node)
    command = list(container.command or ()) if container is not None else []
    if trainer.command is not None:
        command = list(trainer.command)
    args = list(trainer.args) if trainer.args is not None else []
    return " ".join(command + args).strip(GO_SPACE)


def host_range(size: int, start: int) -> str:
    """``start`` alone for one, else ``start-end`` (Flux's idset syntax)."""
    return str(start) if size == 1 else f"{start}-{start + size - 1}"


def hostlist(prefix: str, size: int) -> str:
    """The node pods' hostnames as a Flux hostlist: ``<prefix>-node-0-[0-N]``."""
    return f"{prefix}-{tc.Node}-0-[{host_range(size, 0)}]"


def view_volumes(config_map: str) -> list[Json]:
    """The pod volumes of the view and its config (all but the certificate's), in upstream's order."""
    return [
        {"name": SPACK_VOLUME, "emptyDir": {}},
        {"name": INSTALL_VOLUME, "emptyDir": {}},
        {"name": config_map, "configMap": {"name": config_map, "defaultMode": CONFIG_MAP_MODE}},
        {"name": MEMORY_VOLUME, "emptyDir": {"medium": "Memory"}},
    ]


def broker_config(trainjob: TrainJob, hosts: str, settings: dict[str, str]) -> str:
    """``broker.toml``: bind on the network device, connect to ``<host>.<fqdn>``, the hosts."""
    fqdn = f"{name_of(trainjob)}.{namespace_of(trainjob)}.svc.cluster.local"
    bind = f"tcp://{settings['FLUX_NETWORK_DEVICE']}:%p"
    connect = f"tcp://%h.{fqdn}:%p"
    return _fill(BROKER_TEMPLATE, bind, connect, hosts, settings["FLUX_QUEUE_POLICY"])


def init_script(trainjob: TrainJob, num_nodes: int, settings: dict[str, str]) -> str:
    """The installer's ``init.sh``: copy the view, write the hostlist and broker config."""
    hosts = hostlist(name_of(trainjob), num_nodes)
    return _fill(
        INIT_TEMPLATE,
        FLUX_ROOT,
        f"{name_of(trainjob)}-0",
        hosts,
        broker_config(trainjob, hosts, settings),
    )


def entrypoint_script(
    trainjob: TrainJob, trainer: Trainer, num_nodes: int, policy: FluxMLPolicySource, info: Info
) -> str:
    """The node container's ``entrypoint.sh``: the resource spec (cores, GPUs per node), the
    lead broker's hostname and the ``flux run`` flags (nodes, tasks, GPUs per task)."""
    proc_per_node = _int_proc_per_node(trainer)
    tasks = proc_per_node if proc_per_node is not None else policy.num_proc_per_node
    flags = f"-N {num_nodes} -n {tasks * num_nodes}"
    resources = (
        trainer.resources_per_node
        if trainer.resources_per_node is not None
        else trainer_resources_from_runtime(info.template_spec.obj_apply)
    )
    gpus = gpu_count(resources)
    resource_spec = f"--cores={host_range(tasks, 0)}"
    if gpus > 0:
        flags = f"{flags} -g {gpus}"
        resource_spec = f"{resource_spec} --gpu={host_range(gpus, 0)}"
    return _fill(ENTRYPOINT_TEMPLATE, resource_spec, f"{name_of(trainjob)}-{tc.Node}-0-0", flags)


def encode_z85(data: bytes) -> str:
    """ZeroMQ's Z85 (RFC 32): 5 characters per 4 bytes; "" for a length not a multiple of 4."""
    if len(data) % 4:
        return ""
    out: list[str] = []
    for i in range(0, len(data), 4):
        value = int.from_bytes(data[i : i + 4], "big")
        out += [Z85_ALPHABET[(value // 85**k) % 85] for k in (4, 3, 2, 1, 0)]
    return "".join(out)


def curve_certificate(name: str, uid: str) -> str:
    """The ZeroMQ CURVE certificate ``flux keygen`` would write, its key derived from the uid.

    Upstream takes SHA-256 of the uid as the X25519 secret key, so the same TrainJob always
    gets the same certificate and a re-applied Secret never changes."""
    secret = hashlib.sha256(uid.encode()).digest()
    public = X25519PrivateKey.from_private_bytes(secret).public_key().public_bytes_raw()
    return (
        "#  ZeroMQ CURVE Secret Certificate\n"
        "#  Generated by Kubeflow Trainer\n\n"
        "metadata\n"
        f'    name = "{name}"\n'
        "curve\n"
        f'    public-key = "{encode_z85(public)}"\n'
        f'    secret-key = "{encode_z85(secret)}"\n'
    )


class Flux:
    name = "Flux"

    def __init__(self, context: PluginContext | None = None) -> None:
        del context  # nothing of the cluster or the level is needed

    async def validate(
        self, info: Info | None, old: TrainJob | None, new: TrainJob
    ) -> tuple[list[str], list[FieldError]]:
        """At least one process per node (the TrainJob's value over the runtime's), and no
        ``flux-installer`` init container of the runtime's own in the ``node`` job."""
        try:
            policy = flux_policy(info)
        except RuntimeFailure as failure:
            return [], [FieldError.invalid("spec.runtimeRef", None, failure.message)]
        if info is None or policy is None:
            return [], []
        errors: list[FieldError] = []
        trainer = new.spec.trainer if new.spec is not None else None
        procs: int | str | None = policy.num_proc_per_node
        if trainer is not None and trainer.num_proc_per_node is not None:
            procs = trainer.num_proc_per_node
        if isinstance(procs, int) and procs < 1:
            errors.append(
                FieldError.invalid(
                    "spec.trainer.numProcPerNode",
                    procs,
                    "must be greater than or equal to 1 for Flux TrainJob",
                )
            )
        for pod_set in info.template_spec.pod_sets:
            if pod_set.name != tc.Node:
                continue
            errors += [
                FieldError.invalid(
                    "spec.trainer.initContainers",
                    c.name,
                    f"InitContainer '{INSTALLER_CONTAINER}' is reserved",
                )
                for c in pod_set.init_containers
                if c.name == INSTALLER_CONTAINER
            ]
        return [], errors

    def enforce_ml_policy(self, info: Info | None, trainjob: TrainJob | None) -> None:
        """The view and certificate volumes, the installer init container and the mounts of the
        ``node`` job; the TrainJob's command wrapped by the entrypoint (its args dropped)."""
        if info is None or trainjob is None or trainjob.spec is None or flux_policy(info) is None:
            return
        trainer = _trainer(trainjob)
        settings = broker_settings(trainer, info)
        tj_name = name_of(trainjob)
        config_map = f"{tj_name}{ENTRYPOINT_SUFFIX}"
        command = original_command(trainer, info)
        trainer.command = ["/bin/bash", f"{CONFIG_PATH}/{ENTRYPOINT_KEY}", command]
        trainer.args = None
        curve = {
            "name": CURVE_VOLUME,
            "secret": {"secretName": f"{tj_name}{CURVE_SUFFIX}", "defaultMode": CURVE_MODE},
        }
        for pod_set in info.template_spec.pod_sets:
            if pod_set.name != tc.Node:
                continue
            upsert_volumes(pod_set.volumes, [*view_volumes(config_map), curve])
            pod_set.init_containers.append(
                ContainerInfo(
                    name=INSTALLER_CONTAINER,
                    image=settings["FLUX_VIEW_IMAGE"],
                    command=["/bin/bash", f"{CONFIG_PATH}/{INIT_KEY}"],
                    volume_mounts=[
                        {"name": INSTALL_VOLUME, "mountPath": INSTALL_PATH},
                        {"name": config_map, "mountPath": CONFIG_PATH, "readOnly": True},
                    ],
                )
            )
            for container in pod_set.containers:
                if container.name != tc.Node:
                    continue
                upsert_volume_mounts(
                    container.volume_mounts,
                    [
                        {"name": INSTALL_VOLUME, "mountPath": INSTALL_PATH},
                        {"name": SPACK_VOLUME, "mountPath": SPACK_PATH},
                        {"name": config_map, "mountPath": CONFIG_PATH, "readOnly": True},
                        {"name": CURVE_VOLUME, "mountPath": CURVE_PATH, "readOnly": True},
                        {"name": MEMORY_VOLUME, "mountPath": MEMORY_PATH, "readOnly": True},
                    ],
                )

    async def build(self, info: Info | None, trainjob: TrainJob | None) -> list[Json]:
        """The entrypoint ConfigMap (``entrypoint.sh``, ``init.sh``) and the CURVE Secret,
        both controlled by the TrainJob and applied every reconcile (their content is
        deterministic)."""
        if info is None or trainjob is None or trainjob.spec is None:
            return []
        policy = flux_policy(info)
        if policy is None:
            return []
        trainer = _trainer(trainjob)
        if trainer.num_nodes is None:
            # upstream dereferences it (a recovered panic, retried forever)
            raise RuntimeFailure(
                "spec.trainer.numNodes: Required value: a TrainJob on a Flux runtime needs numNodes",
                [FieldError.required("spec.trainer.numNodes", "a TrainJob on a Flux runtime needs numNodes")],
            )
        settings = broker_settings(trainer, info)
        tj_name, namespace = name_of(trainjob), namespace_of(trainjob)
        uid = (trainjob.metadata.uid if trainjob.metadata else None) or ""
        certificate = curve_certificate(tj_name, uid)
        return [
            {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {
                    "name": f"{tj_name}{ENTRYPOINT_SUFFIX}",
                    "namespace": namespace,
                    "ownerReferences": [owner_reference(trainjob)],
                },
                "data": {
                    ENTRYPOINT_KEY: entrypoint_script(trainjob, trainer, trainer.num_nodes, policy, info),
                    INIT_KEY: init_script(trainjob, trainer.num_nodes, settings),
                },
            },
            {
                "apiVersion": "v1",
                "kind": "Secret",
                "metadata": {
                    "name": f"{tj_name}{CURVE_SUFFIX}",
                    "namespace": namespace,
                    "ownerReferences": [owner_reference(trainjob)],
                },
                "data": {CURVE_CERT_KEY: base64.b64encode(certificate.encode()).decode()},
            },
        ]

    def watches(self) -> list[Watch]:
        """ConfigMaps and Secrets controlled by a TrainJob requeue it (as MPI's do)."""
        return [Watch(CONFIGMAP_GVK, by_controller_owner), Watch(SECRET_GVK, by_controller_owner)]
