// The pod sandbox's "pause" program for the real-kubelet smoke test (scripts/kube-test-kubelet):
// no container registry is reachable here, so the image containerd starts first in every pod is
// built locally from this module, FROM scratch. Standard library only.
module sandbox-agents/scripts/kube/pause

go 1.26.0
