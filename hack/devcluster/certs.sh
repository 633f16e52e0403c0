# Sourced by up.sh: generates, once, the CA, the API server's serving certificate, the admin
# client certificate (group system:masters), the service-account signing key pair, and per node
# the kubelet's client certificate (system:node:NAME) and serving certificate (its node IP).

# CERTS_VERSION changes when what make_certs writes changes, so an older .devcluster/certs is
# made again (for example when the API server's addresses changed).
CERTS_VERSION=2

make_certs() {
	local dir=$STATE/certs
	[[ -f $dir/admin.crt && -f $dir/sa.pub && $(cat "$dir/version" 2>/dev/null) == "$CERTS_VERSION" ]] && return 0
	rm -rf "$dir"
	mkdir -p "$dir"
	log "generating certificates in $dir"
	(
		cd "$dir"
		openssl req -x509 -newkey rsa:2048 -nodes -keyout ca.key -out ca.crt -days 3650 -subj "/CN=devcluster-ca" 2>/dev/null
		cat >apiserver.ext <<EXT
subjectAltName=IP:127.0.0.1,IP:$API_IP,IP:$KUBERNETES_SVC_IP,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local
extendedKeyUsage=serverAuth
EXT
		sign apiserver "/CN=kube-apiserver" apiserver.ext
		echo "extendedKeyUsage=clientAuth" >client.ext
		sign admin "/O=system:masters/CN=devcluster-admin" client.ext
		openssl genrsa -out sa.key 2048 2>/dev/null
		openssl rsa -in sa.key -pubout -out sa.pub 2>/dev/null
		echo "$CERTS_VERSION" >version
	)
}

# make_node_certs NAME IP: the kubelet's client certificate (the Node authorizer knows it by
# system:node:NAME in group system:nodes) and its serving certificate for IP, once.
make_node_certs() {
	local name=$1 ip=$2 dir=$STATE/certs
	[[ -f $dir/$name.crt && -f $dir/$name-serving.crt ]] && return 0
	(
		cd "$dir"
		sign "$name" "/O=system:nodes/CN=system:node:$name" client.ext
		printf 'subjectAltName=IP:%s,DNS:%s\nextendedKeyUsage=serverAuth\n' "$ip" "$name" >"$name-serving.ext"
		sign "$name-serving" "/CN=$name" "$name-serving.ext"
	)
}

# sign NAME SUBJECT EXTFILE: a key and a certificate signed by the CA, in the current directory.
sign() {
	openssl req -newkey rsa:2048 -nodes -keyout "$1.key" -out "$1.csr" -subj "$2" 2>/dev/null
	openssl x509 -req -in "$1.csr" -CA ca.crt -CAkey ca.key -CAcreateserial -out "$1.crt" -days 3650 -extfile "$3" 2>/dev/null
	rm -f "$1.csr"
}

# write_kubeconfig FILE USER CERT KEY: a kubeconfig with the certificates embedded, so it can be
# copied. The admin's is $KUBECONFIG_FILE; each kubelet gets its own.
write_kubeconfig() {
	local file=${1:-$KUBECONFIG_FILE} user=${2:-devcluster-admin} cert=${3:-$STATE/certs/admin.crt} key=${4:-$STATE/certs/admin.key}
	cat >"$file" <<KC
apiVersion: v1
kind: Config
clusters:
- name: devcluster
  cluster:
    server: https://$API_IP:$API_PORT
    certificate-authority-data: $(base64 -w0 "$STATE/certs/ca.crt")
users:
- name: $user
  user:
    client-certificate-data: $(base64 -w0 "$cert")
    client-key-data: $(base64 -w0 "$key")
contexts:
- name: devcluster
  context:
    cluster: devcluster
    user: $user
current-context: devcluster
KC
}
