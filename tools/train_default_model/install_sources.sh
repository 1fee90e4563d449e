#!/usr/bin/env bash
# Installs the Debian packages the corpus is read from (run as root on the dev box).
#   bible-kjv-text (+ bible-kjv, its reader `bible`), sword-text-web (+ diatheke, its reader).
# Licences: see models/default/PROVENANCE.md (each package's /usr/share/doc/<pkg>/copyright).
set -euo pipefail
apt-get update -qq
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq bible-kjv bible-kjv-text sword-text-web diatheke
