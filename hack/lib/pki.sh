# shellcheck shell=bash
# PKI for hack/cluster, made with the openssl CLI: one CA, serving certs bound to 127.0.0.1,
# client certs per component, the service-account signing key pair, and kubeconfigs.
# Kept across restarts (so KUBECONFIG stays valid); regenerated if anything is missing.

_openssl() { openssl "$@" 2>>"$PKI/openssl.log" >/dev/null; }

# issue NAME CN ORG KIND(server|client)
issue() {
  local name=$1 cn=$2 org=$3 kind=$4 subj ext
  subj="/CN=$cn"; [[ -n $org ]] && subj+="/O=$org"
  ext="basicConstraints=critical,CA:FALSE
keyUsage=critical,digitalSignature,keyEncipherment"
  if [[ $kind == server ]]; then
    ext+="
extendedKeyUsage=serverAuth
subjectAltName=IP:127.0.0.1,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local"
  else
    ext+="
extendedKeyUsage=clientAuth"
  fi
  _openssl req -new -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes \
    -keyout "$PKI/$name.key" -out "$PKI/$name.csr" -subj "$subj" || return 1
  printf '%s\n' "$ext" >"$PKI/$name.ext"
  _openssl x509 -req -in "$PKI/$name.csr" -CA "$PKI/ca.crt" -CAkey "$PKI/ca.key" -CAcreateserial \
    -days 3650 -sha256 -extfile "$PKI/$name.ext" -out "$PKI/$name.crt" || return 1
  rm -f "$PKI/$name.csr" "$PKI/$name.ext"
}

# write_kubeconfig FILE CERTNAME USER
write_kubeconfig() {
  local file=$1 cert=$2 user=$3
  cat >"$file.tmp" <<KUBECONFIG
apiVersion: v1
kind: Config
clusters:
- name: tfps
  cluster:
    server: $SERVER
    certificate-authority-data: $(base64 -w0 <"$PKI/ca.crt")
users:
- name: $user
  user:
    client-certificate-data: $(base64 -w0 <"$PKI/$cert.crt")
    client-key-data: $(base64 -w0 <"$PKI/$cert.key")
contexts:
- name: tfps
  context: {cluster: tfps, user: $user, namespace: default}
current-context: tfps
KUBECONFIG
  chmod 600 "$file.tmp" && mv "$file.tmp" "$file"
}

ensure_pki() {
  local need=(ca.crt ca.key sa.key sa.pub apiserver.crt admin.crt kube-controller-manager.crt
    kube-scheduler.crt kwok.crt kube-controller-manager.kubeconfig kube-scheduler.kubeconfig kwok.kubeconfig)
  local f missing=0
  for f in "${need[@]}"; do [[ -s $PKI/$f ]] || missing=1; done
  if (( missing == 0 )) && [[ -s $KUBECONFIG_PATH ]] && grep -q "server: $SERVER\$" "$KUBECONFIG_PATH"; then
    log "reusing certificates in ${PKI#"$REPO"/}"
    return 0
  fi
  log "generating CA, serving/client certificates and service-account keys in ${PKI#"$REPO"/} (openssl)"
  rm -rf "$PKI" && mkdir -p "$PKI" && chmod 700 "$PKI"
  _openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 3650 -sha256 \
    -keyout "$PKI/ca.key" -out "$PKI/ca.crt" -subj "/CN=tfps-local-ca" \
    -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign,digitalSignature" \
    || die "openssl failed to create the CA (see $PKI/openssl.log)"
  _openssl genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:2048 -out "$PKI/sa.key" || die "openssl: sa.key"
  _openssl pkey -in "$PKI/sa.key" -pubout -out "$PKI/sa.pub" || die "openssl: sa.pub"
  local spec
  for spec in "apiserver kube-apiserver - server" \
    "kube-controller-manager system:kube-controller-manager - server" \
    "kube-scheduler system:kube-scheduler - server" \
    "kube-controller-manager-client system:kube-controller-manager - client" \
    "kube-scheduler-client system:kube-scheduler - client" \
    "admin tfps-admin system:masters client" \
    "kwok kwok-controller system:masters client"; do
    # shellcheck disable=SC2086  # deliberate word splitting of the spec
    set -- $spec
    issue "$1" "$2" "${3#-}" "$4" || die "openssl failed to issue the $1 certificate (see $PKI/openssl.log)"
  done
  write_kubeconfig "$PKI/kube-controller-manager.kubeconfig" kube-controller-manager-client system:kube-controller-manager
  write_kubeconfig "$PKI/kube-scheduler.kubeconfig" kube-scheduler-client system:kube-scheduler
  write_kubeconfig "$PKI/kwok.kubeconfig" kwok kwok-controller
  write_kubeconfig "$KUBECONFIG_PATH" admin tfps-admin
}
