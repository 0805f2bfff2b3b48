# Source this on the device machine (repo root): the sources on PYTHONPATH, entry points through
# hand-written dist-info folders (the device image has no pip for our packages), a kernel cache in /tmp.
export PYTHONUNBUFFERED=1
SITE=/tmp/site; mkdir -p $SITE
for b in sm75 sm86 sm89 sm90; do d=$SITE/ninfer_$b-0.1.0.dist-info; mkdir -p $d
  printf 'Metadata-Version: 2.1\nName: ninfer-%s\nVersion: 0.1.0\n' $b > $d/METADATA
  printf '[ninfer]\n%s = ninfer_%s.plugin\n' $b $b > $d/entry_points.txt; done
d=$SITE/ninfer_drafters-0.1.0.dist-info; mkdir -p $d
printf 'Metadata-Version: 2.1\nName: ninfer-drafters\nVersion: 0.1.0\n' > $d/METADATA
printf '[ninfer]\ndrafters = ninfer_drafters\n' > $d/entry_points.txt
export PYTHONPATH=$SITE:$PWD/ninfer-core/src:$PWD/drafters/src:$(ls -d $PWD/backends/*/src | tr '\n' ':')
export NINFER_KERNEL_CACHE=/tmp/kc
