# fcc copper with pair_style sezm: NPT at 300 K / 0 bar reporting the lattice constant, then NVE.
#   lmp_sezm -in in.cu                            (defaults: 1x1x1 cells = 4 atoms, ~1 min on 2 cores)
#   mpirun -np 2 lmp_sezm -in in.cu -var cells 3 -var npt 1000 -var nve 500
#   GPU-sized run (later): -var cells 10 -> 4000 atoms
variable cells  index 1        # fcc cells per side (4 atoms each)
variable npt    index 300      # NPT steps; the lattice constant is averaged over the last half
variable nve    index 60       # NVE steps after that
variable every  index 20       # thermo output interval
variable dt     index 0.001    # ps (1 fs)
variable model  index ../../potentials/Cu.pt
variable device index cpu      # cpu or cuda (the CUDA engine, one GPU per rank)

units           metal
boundary        p p p
atom_style      atomic
lattice         fcc 3.615
region          box block 0 ${cells} 0 ${cells} 0 ${cells}
create_box      1 box
create_atoms    1 box
mass            1 63.546

pair_style      sezm ${model} device ${device}
pair_coeff      * * Cu

neighbor        1.0 bin
neigh_modify    every 1 delay 0 check yes
timestep        ${dt}
velocity        all create 600.0 87287 mom yes rot yes dist gaussian loop geom

variable        a equal (vol/(v_cells*v_cells*v_cells))^(1.0/3.0)
thermo_style    custom step time temp pe etotal press vol v_a
thermo_modify   format float %14.8f
thermo          ${every}

variable        half equal ${npt}/2
variable        nrep equal ${half}/5
fix             baro all npt temp 300.0 300.0 0.1 iso 0.0 0.0 1.0
fix             aavg all ave/time 5 ${nrep} ${npt} v_a
run             ${npt}
variable        a_avg equal f_aavg
print           "Cu lattice constant at 300 K, 0 bar (NPT average over the last ${half} steps): ${a_avg} A"
unfix           aavg
unfix           baro

fix             integrate all nve
run             ${nve}
