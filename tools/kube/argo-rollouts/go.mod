// Wrapper module: pins Argo Rollouts (../versions.env) so that build.sh can copy its published
// Rollout CRD (manifests/crds/rollout-crd.yaml) beside the binaries; nothing of it is compiled.
module tagpin.local/kube/argo-rollouts

go 1.26.0

require github.com/argoproj/argo-rollouts v1.8.3
