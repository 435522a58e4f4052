# shellcheck shell=bash
# PKI for hack/cluster, made with the openssl CLI: one CA, serving certs bound to 127.0.0.1,
# client certs per component, the service-account signing key pair, and kubeconfigs.
# Kept across restarts (so KUBECONFIG stays valid); regenerated if anything is missing.

_openssl() { openssl "$@" 2>>"$PKI/openssl.log" >/dev/null; }

# issue NAME CN ORG KIND(server|client) [SIGNING_CA]
issue() {
  local name=$1 cn=$2 org=$3 kind=$4 ca=${5:-ca} subj ext
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
  _openssl x509 -req -in "$PKI/$name.csr" -CA "$PKI/$ca.crt" -CAkey "$PKI/$ca.key" -CAcreateserial \
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

# new_ca NAME CN: a self-signed CA key pair NAME.crt/NAME.key
new_ca() {
  _openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 3650 -sha256 \
    -keyout "$PKI/$1.key" -out "$PKI/$1.crt" -subj "/CN=$2" \
    -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign,digitalSignature"
}

# ensure_pki: create whatever is missing. A missing CA invalidates everything it signed.
ensure_pki() {
  mkdir -p "$PKI" && chmod 700 "$PKI"
  if [[ ! -s $PKI/ca.crt || ! -s $PKI/ca.key ]]; then
    log "generating the cluster CA and service-account keys in ${PKI#"$REPO"/} (openssl)"
    find "$PKI" -mindepth 1 -delete
    rm -f "$KUBECONFIG_PATH"
    new_ca ca tfps-local-ca || die "openssl failed to create the CA (see $PKI/openssl.log)"
  fi
  if [[ ! -s $PKI/sa.key || ! -s $PKI/sa.pub ]]; then
    _openssl genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:2048 -out "$PKI/sa.key" || die "openssl: sa.key"
    _openssl pkey -in "$PKI/sa.key" -pubout -out "$PKI/sa.pub" || die "openssl: sa.pub"
  fi
  # The front-proxy CA signs the client cert the apiserver presents to aggregated API servers
  # (requestheader authentication); configuring it also keeps the controllers' logs free of
  # "missing content for CA bundle requestheader-client-ca-file".
  if [[ ! -s $PKI/front-proxy-ca.crt || ! -s $PKI/front-proxy-ca.key ]]; then
    rm -f "$PKI"/front-proxy-client.*
    new_ca front-proxy-ca tfps-front-proxy-ca || die "openssl failed to create the front-proxy CA"
  fi
  local spec made=0
  for spec in "apiserver kube-apiserver - server" \
    "kube-controller-manager system:kube-controller-manager - server" \
    "kube-scheduler system:kube-scheduler - server" \
    "kube-controller-manager-client system:kube-controller-manager - client" \
    "kube-scheduler-client system:kube-scheduler - client" \
    "admin tfps-admin system:masters client" \
    "kwok kwok-controller system:masters client" \
    "scheduler-plugins-client system:scheduler-plugins - client" \
    "kueue kueue-webhook - server" \
    "kueue-client system:kueue - client" \
    "front-proxy-client front-proxy-client - client front-proxy-ca"; do
    # shellcheck disable=SC2086  # deliberate word splitting of the spec
    set -- $spec
    [[ -s $PKI/$1.crt && -s $PKI/$1.key ]] && continue
    issue "$1" "$2" "${3#-}" "$4" "${5:-ca}" || die "openssl failed to issue the $1 certificate (see $PKI/openssl.log)"
    made=1
  done
  local kc
  for kc in "kube-controller-manager kube-controller-manager-client system:kube-controller-manager" \
    "kube-scheduler kube-scheduler-client system:kube-scheduler" "kwok kwok kwok-controller" \
    "scheduler-plugins scheduler-plugins-client system:scheduler-plugins" "kueue kueue-client system:kueue"; do
    # shellcheck disable=SC2086
    set -- $kc
    if (( made )) || [[ ! -s $PKI/$1.kubeconfig ]] || ! grep -q "server: $SERVER\$" "$PKI/$1.kubeconfig"; then
      write_kubeconfig "$PKI/$1.kubeconfig" "$2" "$3"
    fi
  done
  if (( made )) || [[ ! -s $KUBECONFIG_PATH ]] || ! grep -q "server: $SERVER\$" "$KUBECONFIG_PATH"; then
    write_kubeconfig "$KUBECONFIG_PATH" admin tfps-admin
  fi
  log "certificates ready in ${PKI#"$REPO"/} ($( ((made)) && echo "issued missing ones" || echo "reused"))"
}
