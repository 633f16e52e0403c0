# Sourced by up.sh: generates, once, the CA, the API server's serving certificate, the admin
# client certificate (group system:masters) and the service-account signing key pair.
make_certs() {
	local dir=$STATE/certs
	[[ -f $dir/admin.crt && -f $dir/sa.pub ]] && return 0
	mkdir -p "$dir"
	log "generating certificates in $dir"
	(
		cd "$dir"
		openssl req -x509 -newkey rsa:2048 -nodes -keyout ca.key -out ca.crt -days 3650 -subj "/CN=devcluster-ca" 2>/dev/null
		cat >apiserver.ext <<EXT
subjectAltName=IP:127.0.0.1,IP:10.96.0.1,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local
extendedKeyUsage=serverAuth
EXT
		openssl req -newkey rsa:2048 -nodes -keyout apiserver.key -out apiserver.csr -subj "/CN=kube-apiserver" 2>/dev/null
		openssl x509 -req -in apiserver.csr -CA ca.crt -CAkey ca.key -CAcreateserial -out apiserver.crt -days 3650 -extfile apiserver.ext 2>/dev/null
		echo "extendedKeyUsage=clientAuth" >client.ext
		openssl req -newkey rsa:2048 -nodes -keyout admin.key -out admin.csr -subj "/O=system:masters/CN=devcluster-admin" 2>/dev/null
		openssl x509 -req -in admin.csr -CA ca.crt -CAkey ca.key -CAcreateserial -out admin.crt -days 3650 -extfile client.ext 2>/dev/null
		openssl genrsa -out sa.key 2048 2>/dev/null
		openssl rsa -in sa.key -pubout -out sa.pub 2>/dev/null
		rm -f ./*.csr
	)
}

# write_kubeconfig: an admin kubeconfig with the certificates embedded, so it can be copied.
write_kubeconfig() {
	local dir=$STATE/certs
	cat >"$KUBECONFIG_FILE" <<KC
apiVersion: v1
kind: Config
clusters:
- name: devcluster
  cluster:
    server: https://127.0.0.1:$API_PORT
    certificate-authority-data: $(base64 -w0 "$dir/ca.crt")
users:
- name: devcluster-admin
  user:
    client-certificate-data: $(base64 -w0 "$dir/admin.crt")
    client-key-data: $(base64 -w0 "$dir/admin.key")
contexts:
- name: devcluster
  context:
    cluster: devcluster
    user: devcluster-admin
current-context: devcluster
KC
}
