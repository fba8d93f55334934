package query

// hvParamFields are the hypervisor parameters Ganeti 3.0 knows (all
// hypervisors' HVS_PARAMETER_TYPES, titled as HVS_PARAMETER_TITLES), each
// an instance field hv/NAME. A parameter the instance's hypervisor does not
// have is unavailable for that instance, as in Ganeti.
var hvParamFields = []paramField{
	{"acpi", "ACPI", KBool},
	{"blockdev_prefix", "hv/blockdev_prefix", KOther},
	{"boot_order", "Boot_order", KOther},
	{"bootloader_args", "hv/bootloader_args", KOther},
	{"bootloader_path", "hv/bootloader_path", KOther},
	{"cdrom2_image_path", "hv/cdrom2_image_path", KOther},
	{"cdrom_disk_type", "hv/cdrom_disk_type", KOther},
	{"cdrom_image_path", "CDROM_image_path", KOther},
	{"cpu_cap", "hv/cpu_cap", KNumber},
	{"cpu_cores", "hv/cpu_cores", KNumber},
	{"cpu_mask", "hv/cpu_mask", KOther},
	{"cpu_sockets", "hv/cpu_sockets", KNumber},
	{"cpu_threads", "hv/cpu_threads", KNumber},
	{"cpu_type", "cpu_type", KOther},
	{"cpu_weight", "hv/cpu_weight", KNumber},
	{"cpuid", "hv/cpuid", KOther},
	{"device_model", "hv/device_model", KOther},
	{"devices", "hv/devices", KOther},
	{"disk_aio", "hv/disk_aio", KOther},
	{"disk_cache", "hv/disk_cache", KOther},
	{"disk_discard", "hv/disk_discard", KOther},
	{"disk_type", "Disk_type", KOther},
	{"drop_capabilities", "hv/drop_capabilities", KOther},
	{"extra_cgroups", "hv/extra_cgroups", KOther},
	{"extra_config", "hv/extra_config", KOther},
	{"floppy_image_path", "hv/floppy_image_path", KOther},
	{"init_script", "hv/init_script", KOther},
	{"initrd_path", "Initrd_path", KOther},
	{"kernel_args", "hv/kernel_args", KOther},
	{"kernel_path", "Kernel_path", KOther},
	{"keymap", "hv/keymap", KOther},
	{"kvm_extra", "hv/kvm_extra", KOther},
	{"kvm_flag", "hv/kvm_flag", KOther},
	{"kvm_path", "hv/kvm_path", KOther},
	{"kvm_pci_reservations", "hv/kvm_pci_reservations", KNumber},
	{"machine_version", "hv/machine_version", KOther},
	{"mem_path", "hv/mem_path", KOther},
	{"migration_caps", "hv/migration_caps", KOther},
	{"migration_downtime", "hv/migration_downtime", KNumber},
	{"nic_type", "NIC_type", KOther},
	{"num_ttys", "hv/num_ttys", KNumber},
	{"pae", "PAE", KBool},
	{"pci_pass", "pci_pass", KOther},
	{"reboot_behavior", "hv/reboot_behavior", KOther},
	{"root_path", "hv/root_path", KOther},
	{"scsi_controller_type", "hv/scsi_controller_type", KOther},
	{"security_domain", "hv/security_domain", KOther},
	{"security_model", "hv/security_model", KOther},
	{"serial_console", "hv/serial_console", KBool},
	{"serial_speed", "hv/serial_speed", KNumber},
	{"soundhw", "hv/soundhw", KOther},
	{"spice_bind", "hv/spice_bind", KOther},
	{"spice_image_compression", "hv/spice_image_compression", KOther},
	{"spice_ip_version", "hv/spice_ip_version", KNumber},
	{"spice_jpeg_wan_compression", "hv/spice_jpeg_wan_compression", KOther},
	{"spice_password_file", "hv/spice_password_file", KOther},
	{"spice_playback_compression", "hv/spice_playback_compression", KBool},
	{"spice_streaming_video", "hv/spice_streaming_video", KOther},
	{"spice_tls_ciphers", "hv/spice_tls_ciphers", KOther},
	{"spice_use_tls", "hv/spice_use_tls", KBool},
	{"spice_use_vdagent", "hv/spice_use_vdagent", KBool},
	{"spice_zlib_glz_wan_compression", "hv/spice_zlib_glz_wan_compression", KOther},
	{"startup_timeout", "hv/startup_timeout", KNumber},
	{"usb_devices", "hv/usb_devices", KOther},
	{"usb_mouse", "hv/usb_mouse", KOther},
	{"use_bootloader", "hv/use_bootloader", KBool},
	{"use_chroot", "hv/use_chroot", KBool},
	{"use_guest_agent", "hv/use_guest_agent", KBool},
	{"use_localtime", "hv/use_localtime", KBool},
	{"user_shutdown", "hv/user_shutdown", KBool},
	{"vga", "hv/vga", KOther},
	{"vhost_net", "hv/vhost_net", KBool},
	{"vif_script", "hv/vif_script", KOther},
	{"vif_type", "hv/vif_type", KOther},
	{"viridian", "hv/viridian", KBool},
	{"virtio_net_queues", "hv/virtio_net_queues", KNumber},
	{"vnc_bind_address", "VNC_bind_address", KOther},
	{"vnc_password_file", "hv/vnc_password_file", KOther},
	{"vnc_tls", "hv/vnc_tls", KBool},
	{"vnc_x509_path", "hv/vnc_x509_path", KOther},
	{"vnc_x509_verify", "hv/vnc_x509_verify", KBool},
	{"vnet_hdr", "hv/vnet_hdr", KBool},
}

// ndParamFields are Ganeti's node parameters (NDS_PARAMETER_TYPES), each a
// node and group field ndp/NAME.
var ndParamFields = []paramField{
	{"cpu_speed", "ndp/cpu_speed", KFloat},
	{"exclusive_storage", "ExclusiveStorage", KBool},
	{"oob_program", "OutOfBandProgram", KOther},
	{"ovs", "OpenvSwitch", KBool},
	{"ovs_link", "OpenvSwitchLink", KOther},
	{"ovs_name", "OpenvSwitchName", KOther},
	{"spindle_count", "SpindleCount", KNumber},
	{"ssh_port", "ndp/ssh_port", KNumber},
}

// beParamFields are Ganeti's backend parameters (BES_PARAMETER_TYPES), each
// an instance field be/NAME.
var beParamFields = []paramField{
	{"always_failover", "be/always_failover", KBool},
	{"auto_balance", "Auto_balance", KBool},
	{"maxmem", "ConfigMaxMem", KUnit},
	{"minmem", "ConfigMinMem", KUnit},
	{"spindle_use", "be/spindle_use", KNumber},
	{"vcpus", "ConfigVCPUs", KNumber},
}

// paramField is one parameter shown as its own field.
type paramField struct {
	Name, Title string
	Kind        Kind
}
